# Ask for an announcement. The response completes with a function_call
# "approval" whose arguments hold the draft: the run waits for an answer.
curl -s "${BASE:-http://127.0.0.1:8080}/v1/responses" \
  -H 'Content-Type: application/json' \
  -d '{"model": "announce", "input": "our durable workflow server"}'
