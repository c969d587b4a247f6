// The TypeScript SDK v2 anchor over stdio in both eras: the same server as server.mjs, served through the SDK's
// documented era-deciding stdio entry point `serveStdio` (server.mjs connects a StdioServerTransport by hand,
// which serves the 2025 era only). A 2026-07-28 opening gets a modern instance; an `initialize` a 2025-era one.
// usage: node serve_stdio.mjs
import { McpServer } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { z } from 'zod';

serveStdio(() => {
  const server = new McpServer({ name: 'anchor-ts-sdk-v2', version: '1' });
  server.registerTool(
    'echo',
    { description: 'Echo the given text back.', inputSchema: z.object({ text: z.string() }) },
    async ({ text }) => ({ content: [{ type: 'text', text }] }),
  );
  return server;
});
