// A Claude Code channel server built on the official TypeScript MCP SDK, the way a third party
// writes one: it declares only experimental["claude/channel"], pushes every inbound message as
// notifications/claude/channel with {content, meta} (no event log, nothing to acknowledge) and
// answers through one tool, reply(chat_id, text).
//
// Its "platform" is local, so a test can drive it:
//   CLAUDE_CHANNEL_FIRST    one JSON message {"content", "meta"} pushed as soon as the client has
//                           finished the handshake (before an orchestrator's intake is listening);
//   CLAUDE_CHANNEL_INBOX    a Unix socket: each line written there is one JSON message to push;
//   CLAUDE_CHANNEL_REPLIES  a file: each reply is appended as one JSON line {"chat_id", "text"}.
import { appendFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { createInterface } from "node:readline";

import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const { CLAUDE_CHANNEL_FIRST, CLAUDE_CHANNEL_INBOX, CLAUDE_CHANNEL_REPLIES } = process.env;

const mcp = new Server(
  { name: "claude-ts-fake", version: "0.0.1" },
  {
    capabilities: { tools: {}, experimental: { "claude/channel": {} } },
    instructions:
      'Messages arrive as <channel source="..." chat_id="...">. Answer with the reply tool, ' +
      "passing the chat_id from the tag.",
  },
);

mcp.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: [
    {
      name: "reply",
      description: "Send a message to the chat the user wrote from.",
      inputSchema: {
        type: "object",
        properties: { chat_id: { type: "string" }, text: { type: "string" } },
        required: ["chat_id", "text"],
      },
    },
  ],
}));

mcp.setRequestHandler(CallToolRequestSchema, async (request) => {
  const { name, arguments: args } = request.params;
  if (name !== "reply" || typeof args?.chat_id !== "string" || typeof args?.text !== "string") {
    return { content: [{ type: "text", text: "reply takes chat_id and text" }], isError: true };
  }
  const line = JSON.stringify({ chat_id: args.chat_id, text: args.text });
  if (CLAUDE_CHANNEL_REPLIES) appendFileSync(CLAUDE_CHANNEL_REPLIES, line + "\n");
  else process.stderr.write(line + "\n");
  return { content: [{ type: "text", text: "sent" }] };
});

async function push(line) {
  const message = JSON.parse(line);
  await mcp.notification({
    method: "notifications/claude/channel",
    params: { content: String(message.content), meta: message.meta ?? {} },
  });
}

mcp.oninitialized = () => {
  if (CLAUDE_CHANNEL_FIRST) push(CLAUDE_CHANNEL_FIRST).catch((error) => console.error(error));
};

if (CLAUDE_CHANNEL_INBOX) {
  rmSync(CLAUDE_CHANNEL_INBOX, { force: true });
  createServer((socket) => {
    const lines = createInterface({ input: socket });
    lines.on("line", (line) => {
      if (line.trim()) push(line).catch((error) => console.error(error));
    });
  }).listen(CLAUDE_CHANNEL_INBOX);
}

await mcp.connect(new StdioServerTransport());
