-- 002_hosts: the host registry (store.HostRegistry). Each host upserts its
-- row every heartbeat; a row whose expires_at passed is a dead host's and is
-- deleted by the next heartbeat of any host.
CREATE TABLE hosts (
    id           text PRIMARY KEY,
    addr         text NOT NULL DEFAULT '',
    max_runs     integer NOT NULL DEFAULT 0,
    runs         integer NOT NULL DEFAULT 0,
    started_at   timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL
);
