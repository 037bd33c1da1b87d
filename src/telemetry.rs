//! Logging and tracing setup: logs to stderr filtered by `ASSAY_LOG`, and spans exported over
//! OTLP/HTTP when `--otlp-endpoint` or `OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT` is set. With no
//! endpoint there is no exporter, no OpenTelemetry layer and no propagator: nothing is paid.
//!
//! The SDK reads the other standard variables itself: `OTEL_SERVICE_NAME` and
//! `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_EXPORTER_OTLP_[TRACES_]HEADERS` and `_TIMEOUT`,
//! `OTEL_TRACES_SAMPLER[_ARG]`, `OTEL_BSP_*`.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Flushes and stops the exporter when dropped. Drop it outside the async runtime: the HTTP
/// client it owns blocks while it sends the last spans.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(e) = provider.shutdown()
        {
            errln!("warning: failed to export the last trace spans: {e}");
        }
    }
}

/// Installs the subscriber. `service` names this process in traces unless `OTEL_SERVICE_NAME`
/// or `OTEL_RESOURCE_ATTRIBUTES` does.
pub fn init(service: &'static str, otlp_endpoint: Option<&str>) -> Telemetry {
    let filter = tracing_subscriber::EnvFilter::try_from_env("ASSAY_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // Colour only for a terminal that wants it: a log, a pipe or a CI console gets plain text.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(colour);
    let (provider, problem) = match exporter(otlp_endpoint) {
        Ok(Some(exporter)) => (Some(provider(service, exporter)), None),
        Ok(None) => (None, None),
        Err(problem) => (None, Some(problem)),
    };
    // Spans reach the exporter whatever ASSAY_LOG says; the filter is for stderr only.
    let traces = provider.as_ref().map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("assay"))
            .with_filter(tracing_subscriber::filter::LevelFilter::INFO)
    });
    tracing_subscriber::registry()
        .with(logs.with_filter(filter))
        .with(traces)
        .init();
    if provider.is_some() {
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    }
    if let Some(problem) = problem {
        tracing::warn!("trace export is off: {problem}");
    }
    Telemetry { provider }
}

fn provider(
    service: &'static str,
    exporter: opentelemetry_otlp::SpanExporter,
) -> SdkTracerProvider {
    let named_by_env = std::env::var_os("OTEL_SERVICE_NAME").is_some()
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|a| a.contains("service.name="));
    let resource = if named_by_env {
        Resource::builder().build()
    } else {
        Resource::builder().with_service_name(service).build()
    };
    SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build()
}

/// The OTLP/HTTP exporter the flag or the environment asks for, if any.
fn exporter(flag: Option<&str>) -> Result<Option<opentelemetry_otlp::SpanExporter>, String> {
    let set = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    if set("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    let flag = flag.filter(|f| !f.trim().is_empty());
    if flag.is_none()
        && set("OTEL_EXPORTER_OTLP_ENDPOINT").is_none()
        && set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_none()
    {
        return Ok(None);
    }
    let protocol = set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|| set("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .unwrap_or_else(|| "http/protobuf".into());
    if protocol != "http/protobuf" {
        return Err(format!(
            "OTLP protocol {protocol:?} is not supported (hint: set OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf and point the endpoint at the collector's OTLP/HTTP port, usually 4318)"
        ));
    }
    let mut builder = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary);
    // Like OTEL_EXPORTER_OTLP_ENDPOINT, the flag names the collector; the signal path is ours.
    if let Some(base) = flag {
        builder = builder.with_endpoint(format!("{}/v1/traces", base.trim_end_matches('/')));
    }
    builder
        .build()
        .map(Some)
        .map_err(|e| format!("cannot build the OTLP exporter: {e}"))
}
