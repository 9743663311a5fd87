# Or poll response $1 until it is no longer queued or in progress.
while curl -s "${BASE:-http://127.0.0.1:8080}/v1/responses/$1" | grep -Eq '"status":"(queued|in_progress)"'; do
  sleep 1
done
curl -s "${BASE:-http://127.0.0.1:8080}/v1/responses/$1"
