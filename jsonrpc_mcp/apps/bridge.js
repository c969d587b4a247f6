// The view side of MCP Apps (io.modelcontextprotocol/ui): JSON-RPC 2.0 with the host over postMessage, and DOM
// helpers that only ever put text into the page. Served inline in every View built by jsonrpc_mcp.apps.View.
"use strict";
(function () {
  const pending = new Map();
  const handlers = new Map();
  let nextId = 1;
  let host = null; // the window of the host (the parent frame)

  function post(message) {
    window.parent.postMessage(Object.assign({ jsonrpc: "2.0" }, message), "*");
  }

  function request(method, params) {
    const id = nextId++;
    return new Promise(function (resolve, reject) {
      pending.set(id, { resolve: resolve, reject: reject });
      post({ id: id, method: method, params: params || {} });
    });
  }

  function notify(method, params) {
    post({ method: method, params: params || {} });
  }

  function on(method, handler) {
    handlers.set(method, handler);
  }

  window.addEventListener("message", function (event) {
    if (event.source !== window.parent) return; // only the host speaks to the view
    const message = event.data;
    if (!message || message.jsonrpc !== "2.0") return;
    if (message.method === undefined && pending.has(message.id)) {
      const waiter = pending.get(message.id);
      pending.delete(message.id);
      if (message.error) waiter.reject(new Error(String(message.error.message || "request failed")));
      else waiter.resolve(message.result);
      return;
    }
    const handler = handlers.get(message.method);
    if (message.id !== undefined) {
      // a request from the host: answered (teardown needs nothing from a read-only view)
      Promise.resolve(handler ? handler(message.params || {}) : {}).then(function (result) {
        post({ id: message.id, result: result || {} });
      });
    } else if (handler) {
      handler(message.params || {});
    }
  });

  // Elements: text only through textContent, attributes from an allow-list, links only http(s).
  const ATTRIBUTES = new Set(["class", "id", "title", "role", "aria-label", "data-node", "tabindex"]);
  const SVG_ATTRIBUTES = new Set([
    "x", "y", "cx", "cy", "r", "x1", "y1", "x2", "y2", "dx", "dy", "width", "height", "viewBox",
    "text-anchor", "transform", "d", "marker-end", "refX", "refY", "markerWidth", "markerHeight", "orient",
  ]);
  const SVG = "http://www.w3.org/2000/svg";

  function safeUrl(text) {
    if (typeof text !== "string") return null;
    let url;
    try {
      url = new URL(text);
    } catch (e) {
      return null;
    }
    return url.protocol === "https:" || url.protocol === "http:" ? url.href : null;
  }

  function el(tag, attributes, children, namespace) {
    const node = namespace ? document.createElementNS(namespace, tag) : document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      if (ATTRIBUTES.has(name) || (namespace === SVG && SVG_ATTRIBUTES.has(name))) {
        node.setAttribute(name, String(value));
      }
    }
    for (const child of children || []) {
      node.append(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }

  function reportSize() {
    const box = document.documentElement.getBoundingClientRect();
    notify("ui/notifications/size-changed", { width: Math.ceil(box.width), height: Math.ceil(box.height) });
  }

  window.mcpApp = {
    request: request,
    notify: notify,
    on: on,
    el: el,
    svg: function (tag, attributes, children) {
      return el(tag, attributes, children, SVG);
    },
    safeUrl: safeUrl,
    reportSize: reportSize,
    data: function () {
      const holder = document.getElementById("mcp-app-data");
      return holder ? JSON.parse(holder.textContent) : null;
    },
    callTool: function (name, args) {
      return request("tools/call", { name: name, arguments: args || {} });
    },
    openLink: function (url) {
      const safe = safeUrl(url);
      return safe ? request("ui/open-link", { url: safe }) : Promise.reject(new Error("not an http(s) URL"));
    },
    connect: function (appInfo, capabilities) {
      return request("ui/initialize", {
        appInfo: appInfo,
        appCapabilities: capabilities || {},
        protocolVersion: "2026-01-26",
      }).then(function (result) {
        host = result || {};
        notify("ui/notifications/initialized", {});
        if (typeof ResizeObserver === "function") new ResizeObserver(reportSize).observe(document.documentElement);
        return host.hostContext || {};
      });
    },
  };
})();
