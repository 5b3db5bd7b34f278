# The load balancer: HAProxy from Debian with deploy/haproxy.cfg.
ARG RUNTIME_BASE=folio-base:bookworm
FROM ${RUNTIME_BASE}
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      haproxy curl ca-certificates >/dev/null && rm -rf /var/lib/apt/lists/*
COPY deploy/haproxy.cfg /etc/haproxy/haproxy.cfg
RUN haproxy -c -f /etc/haproxy/haproxy.cfg
USER haproxy
EXPOSE 8000
# -W: master-worker, so SIGTERM stops it cleanly as PID 1; -db: stay in the foreground.
ENTRYPOINT ["haproxy", "-W", "-db", "-f", "/etc/haproxy/haproxy.cfg"]
