// Preloaded into a peer server (node --require ./loopback.cjs ...): every server it opens listens on 127.0.0.1
// only, whatever host the program names (server-everything listens on all interfaces), and the port it got is
// written to stderr as "loopback-port: N" (start it with PORT=0 for an ephemeral one).
"use strict";
const net = require("node:net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "object" && args[0] !== null) {
    args[0] = { ...args[0], host: "127.0.0.1" };
  } else if (typeof args[1] === "string") {
    args[1] = "127.0.0.1";
  } else {
    args.splice(1, 0, "127.0.0.1");
  }
  this.once("listening", () => process.stderr.write(`loopback-port: ${this.address().port}\n`));
  return listen.apply(this, args);
};
