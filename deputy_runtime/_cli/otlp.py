"""``--otlp ENDPOINT``: export the command's traces to an OTLP/HTTP collector.

Needs the ``otel`` extra plus the SDK and the OTLP/HTTP exporter
(``opentelemetry-sdk``, ``opentelemetry-exporter-otlp-proto-http``). Spans are batched
and flushed when the command ends.
"""

from __future__ import annotations

from collections.abc import Callable

from .._extras import install_hint
from ..tracing import configure, disable
from .leadsetup import UsageError

__all__ = ["start_otlp"]


def start_otlp(endpoint: str) -> Callable[[], None]:
    """Configure tracing with an OTLP/HTTP exporter to ``endpoint``.

    Args:
        endpoint: The collector's traces URL (``http://host:4318/v1/traces``).

    Returns:
        The function that flushes the spans still batched and turns tracing off.

    Raises:
        UsageError: ``endpoint`` is not an http(s) URL, or the exporter is not installed.
    """
    if not endpoint.startswith(("http://", "https://")):
        raise UsageError(f"--otlp must be an http:// or https:// URL, got {endpoint!r}")
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise UsageError(
            f"--otlp needs the OpenTelemetry SDK and OTLP/HTTP exporter ({exc.name} is not "
            "installed); install them with: "
            f"{install_hint('otel')}, then pip install "
            "opentelemetry-sdk opentelemetry-exporter-otlp-proto-http"
        ) from None
    provider = TracerProvider(resource=Resource.create({"service.name": "deputy-runtime"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    configure(provider)

    def stop() -> None:
        disable()
        provider.shutdown()  # flushes the batch

    return stop
