# Start a response in the background and follow its events as they come.
# Every event has a sequence_number; note the last one you saw.
curl -sN "${BASE:-http://127.0.0.1:8080}/v1/responses" \
  -H 'Content-Type: application/json' \
  -d '{"model": "announce", "background": true, "stream": true,
       "input": "our durable workflow server, which keeps every step of every run in its database, so that a crash, a deploy or a kill -9 loses nothing: the run goes on from its last step"}'
