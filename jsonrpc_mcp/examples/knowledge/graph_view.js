// The knowledge server's view of the graph around a node (ui://knowledge/graph). It draws what query_graph
// returns (structuredContent, kind graphResults:v1): every node and relation is stored text that any client may
// have written, so it only ever reaches the page through textContent and attribute-free elements (mcpApp.el).
(function () {
  const app = window.mcpApp;
  const main = document.getElementById("graph");
  const status = document.getElementById("status");
  let depth = 1;

  function show(message) {
    status.textContent = message;
  }

  function depths(start, triples) {
    const level = new Map([[start, 0]]);
    let frontier = [start];
    while (frontier.length) {
      const next = [];
      for (const node of frontier) {
        for (const t of triples) {
          for (const [a, b] of [[t.subject, t.object], [t.object, t.subject]]) {
            if (a === node && !level.has(b)) {
              level.set(b, level.get(node) + 1);
              next.push(b);
            }
          }
        }
      }
      frontier = next;
    }
    return level;
  }

  function layout(start, nodes, triples) {
    const level = depths(start, triples);
    const rings = new Map();
    for (const node of nodes) {
      const ring = level.has(node) ? level.get(node) : 1;
      if (!rings.has(ring)) rings.set(ring, []);
      rings.get(ring).push(node);
    }
    const where = new Map();
    for (const [ring, members] of rings) {
      members.forEach(function (node, i) {
        const angle = (2 * Math.PI * i) / members.length - Math.PI / 2 + ring * 0.4;
        const radius = ring * 140;
        where.set(node, { x: 300 + radius * Math.cos(angle), y: 300 + radius * Math.sin(angle) });
      });
    }
    return where;
  }

  function explore(node) {
    show("Loading the graph around " + node + "…");
    app.callTool("query_graph", { node: node, depth: depth }).then(render, function (error) {
      show("Could not load the graph: " + error.message);
    });
  }

  function nodeItem(node, start) {
    const label = app.el("span", { class: "node-label" }, [node]);
    const children = [label];
    if (node !== start) {
      const button = app.el("button", { class: "explore", "data-node": node, title: "Explore from here" }, [
        "Explore",
      ]);
      button.addEventListener("click", function () {
        explore(node);
      });
      children.push(button);
    }
    const url = app.safeUrl(node);
    if (url) {
      const open = app.el("button", { class: "open", title: url }, ["Open"]);
      open.addEventListener("click", function () {
        app.openLink(url);
      });
      children.push(open);
    }
    return app.el("li", { class: "node", "data-node": node }, children);
  }

  function render(result) {
    const data = result && result.structuredContent;
    if (!data || data.kind !== "graphResults:v1") {
      const text = result && result.content && result.content[0] && result.content[0].text;
      main.replaceChildren(app.el("p", { class: "note" }, [text || "Nothing to show."]));
      show(result && result.isError ? "The tool failed." : "");
      app.reportSize();
      return;
    }
    depth = data.depth || 1;
    const start = data.node;
    const where = layout(start, data.nodes, data.triples);
    const svg = app.svg("svg", { viewBox: "0 0 600 600", role: "img", "aria-label": "Graph around " + start });
    const marker = app.svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "24", refY: "5",
      markerWidth: "6", markerHeight: "6", orient: "auto" }, [app.svg("path", { d: "M 0 0 L 10 5 L 0 10 z" })]);
    svg.append(app.svg("defs", {}, [marker]));
    for (const t of data.triples) {
      const a = where.get(t.subject);
      const b = where.get(t.object);
      if (!a || !b) continue;
      svg.append(app.svg("line", { class: "edge", x1: a.x, y1: a.y, x2: b.x, y2: b.y, "marker-end": "url(#arrow)" }));
      svg.append(app.svg("text", { class: "predicate", x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 - 4,
        "text-anchor": "middle" }, [t.predicate]));
    }
    for (const [node, p] of where) {
      const dot = app.svg("g", { class: node === start ? "vertex start" : "vertex", "data-node": node }, [
        app.svg("circle", { cx: p.x, cy: p.y, r: node === start ? 16 : 11 }),
        app.svg("text", { x: p.x, y: p.y + 30, "text-anchor": "middle" }, [node]),
      ]);
      if (node !== start) {
        dot.addEventListener("click", function () {
          explore(node);
        });
      }
      svg.append(dot);
    }
    const relations = data.triples.map(function (t) {
      return app.el("li", { class: "relation" }, [
        app.el("span", { class: "subject" }, [t.subject]),
        " —",
        app.el("em", { class: "predicate" }, [t.predicate]),
        "→ ",
        app.el("span", { class: "object" }, [t.object]),
      ]);
    });
    main.replaceChildren(
      app.el("h1", {}, ["Around ", app.el("span", { class: "start" }, [start])]),
      app.el("p", { class: "summary" }, [data.summary || ""]),
      svg,
      app.el("h2", {}, ["Nodes"]),
      app.el("ul", { class: "nodes" }, data.nodes.map(function (n) {
        return nodeItem(n, start);
      })),
      app.el("h2", {}, ["Relations"]),
      app.el("ul", { class: "relations" }, relations)
    );
    show("");
    app.reportSize();
  }

  app.on("ui/notifications/tool-input", function (params) {
    const args = params.arguments || {};
    if (typeof args.depth === "number") depth = args.depth;
    if (typeof args.node === "string") show("Loading the graph around " + args.node + "…");
  });
  app.on("ui/notifications/tool-result", render);
  app.on("ui/notifications/tool-cancelled", function () {
    show("The call was cancelled.");
  });
  app.connect({ name: "knowledge-graph-view", version: "1.0.0" }).then(
    function () {
      document.body.setAttribute("data-ready", "true");
    },
    function (error) {
      show("The host did not answer: " + error.message);
    }
  );
})();
