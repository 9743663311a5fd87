-- 012_journal: the run journal (store.Journal). One row per entry a
-- superstep appended before its commit: a finished model call, tool call
-- or sub-step. seq orders a run's entries; rows of a run's steps up to a
-- commit's step are deleted by that commit (CommitParams.JournalPrune, in
-- the commit's transaction), and all of a run's rows with the run (the
-- foreign key).
CREATE TABLE journal (
    seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id     text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step       bigint NOT NULL,
    epoch      bigint NOT NULL,
    key        text NOT NULL,
    hash       text NOT NULL,
    data       bytea,
    created_at timestamptz NOT NULL
);
CREATE INDEX journal_run ON journal (run_id, step, seq);
