# Answer the approval: $1 is the response id, $2 the function_call's call_id.
curl -s "${BASE:-http://127.0.0.1:8080}/v1/responses" \
  -H 'Content-Type: application/json' \
  -d '{"model": "announce", "previous_response_id": "'"$1"'",
       "input": [{"type": "function_call_output", "call_id": "'"$2"'", "output": "true"}]}'
