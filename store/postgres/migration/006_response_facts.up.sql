-- superstep schema version 6 is 006_response_facts (responses.publication
-- and responses.input), written on another branch. This file only holds
-- its number so that 007 applies here; the merge takes that branch's file.
SELECT 1;
