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

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::TraceContextExt as _;

    #[test]
    fn without_an_exporter_nothing_is_written_or_read() {
        // No propagator is installed in this process, as in a service started without OTLP.
        let span = tracing::info_span!("job delivery");
        let mut headers = HeaderMap::new();
        span.in_scope(|| inject(&mut headers));
        assert_eq!(headers.iter().count(), 0);
        headers.insert(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        );
        set_parent(&span, Some(&headers));
        assert!(!span.context().has_active_span());
    }
}
