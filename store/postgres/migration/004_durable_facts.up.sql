-- superstep schema version 4: durable facts instead of inferences.
-- responses.start_step: the run's last step when the response was created
-- (its first commit, step start_step+1, absorbed the answers it carried).
-- runs.resume_*: failed attempts to resume the run since its last commit, so
-- that no host claims it in a loop and an operator sees why.
ALTER TABLE responses ADD COLUMN start_step BIGINT NOT NULL DEFAULT 0;
UPDATE responses SET start_step = commit_step;
ALTER TABLE runs ADD COLUMN resume_failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN resume_error TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN resume_not_before TIMESTAMPTZ NOT NULL DEFAULT 'epoch';
