//! W3C trace context (`traceparent`, `tracestate`) in NATS message headers, so that one trace
//! spans CLI → coordinator → worker → sandbox. The propagator is the process-wide one the binary
//! installs with its OTLP exporter; without an exporter it is a no-op, so injecting writes no
//! header and extracting yields an empty context: tracing costs nothing when it is off.

use async_nats::HeaderMap;
use opentelemetry::propagation::{Extractor, Injector};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Writes the current span's context into `headers` (nothing when tracing is off).
pub fn inject(headers: &mut HeaderMap) {
    let context = tracing::Span::current().context();
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.inject_context(&context, &mut HeaderInjector(headers));
    });
}

/// Makes `span` a child of the context carried in `headers`, when they carry one.
pub fn set_parent(span: &tracing::Span, headers: Option<&HeaderMap>) {
    let Some(headers) = headers else { return };
    let context = opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&HeaderExtractor(headers))
    });
    let _ = span.set_parent(context);
}

struct HeaderInjector<'a>(&'a mut HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key, value.as_str());
    }
}

struct HeaderExtractor<'a>(&'a HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(|value| value.as_str())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.iter().map(|(name, _)| name.as_ref()).collect()
    }
}
