// A real OpenID provider (the pinned npm package oidc-provider) for the authorization tests, on loopback.
//
//   node provider.mjs RESOURCE [--dpop]
//
// It listens on a free port of 127.0.0.1 and prints one line of JSON to stdout once it serves:
// {"issuer": ..., "client_id": ..., "client_secret": ...}. One confidential client may use the client credentials
// grant (client_secret_basic); with a resource indicator (RFC 8707) naming RESOURCE, its access tokens are JWTs
// (RFC 9068, RS256) for that audience with the scopes notes:read and notes:write. DPoP (RFC 9449) is enabled, so a
// token asked for with a proof is bound to its key (cnf.jkt). It stops when its standard input closes.
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { createServer } from "node:http";
import Provider from "oidc-provider";

const resource = process.argv[2];
if (!resource) {
  console.error("usage: node provider.mjs RESOURCE");
  process.exit(2);
}

const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const signing = { ...privateKey.export({ format: "jwk" }), kid: "op-rsa-1", alg: "RS256", use: "sig" };
const client = { client_id: "mcp-service", client_secret: randomBytes(24).toString("base64url") };

const server = createServer();
server.listen(0, "127.0.0.1", () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    jwks: { keys: [signing] },
    clients: [
      {
        ...client,
        grant_types: ["client_credentials"],
        redirect_uris: [],
        response_types: [],
        token_endpoint_auth_method: "client_secret_basic",
      },
    ],
    scopes: ["notes:read", "notes:write"],
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      dPoP: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => resource,
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, indicator) => {
          if (indicator !== resource) {
            throw new Error("unknown resource");
          }
          return {
            audience: resource,
            scope: "notes:read notes:write",
            accessTokenFormat: "jwt",
            accessTokenTTL: 600,
            jwt: { sign: { alg: "RS256" } },
          };
        },
      },
    },
  });
  provider.proxy = false;
  server.on("request", provider.callback());
  process.stdout.write(JSON.stringify({ issuer, ...client }) + "\n");
});

process.stdin.on("end", () => server.close(() => process.exit(0)));
process.stdin.resume();
