# Chirp's API, and the secret Chirp sends with each webhook call.
export NEXO_CHIRP_API_URL=https://chirp.example/api
export NEXO_CHIRP_SECRET="$(cat ~/.config/nexo/chirp.secret)"

# Over stdio, for any MCP client (nexo, Claude Code, the MCP Inspector):
python -m docs.examples.chirp

# Over Streamable HTTP, with a bearer token (required when not bound to loopback):
NEXO_SERVER_TOKEN_FILE=~/.config/nexo/token python -m docs.examples.chirp --http 127.0.0.1:8766

# Try its tool and watch its notifications by hand:
npx @modelcontextprotocol/inspector python -m docs.examples.chirp
