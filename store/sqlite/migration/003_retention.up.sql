-- superstep schema version 3: response retention (store.ResponsePruner)
-- finds the responses completed before a time through this index instead
-- of scanning every response.
CREATE INDEX responses_completed ON responses (completed_at) WHERE completed_at IS NOT NULL;
