# Follow response $1 again, from the event after sequence number $2.
curl -sN "${BASE:-http://127.0.0.1:8080}/v1/responses/$1?stream=true&starting_after=$2"
