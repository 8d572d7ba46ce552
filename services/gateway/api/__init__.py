"""The gateway's edge: the gRPC servicer (request validation), REST/JSON
transcoding and its HTTP rules (Host, cross-site writes, deadlines), API keys
and rate limits, the web console and its per-stage latency summary."""
