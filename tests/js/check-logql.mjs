// Parses LogQL with Grafana's own grammar (@grafana/lezer-logql) and reports, per query, whether
// it parsed and which label names its selectors and label filters use.
//   node check-logql.mjs FILE.json   (a JSON list of strings or of {name, logql})
// Prints a JSON list of {logql, ok, error, labels}; exits 1 if any query does not parse.
import { readFileSync } from "node:fs";
import { parser } from "@grafana/lezer-logql";

const input = JSON.parse(readFileSync(process.argv[2] === "-" ? 0 : process.argv[2], "utf8"));
let bad = 0;
const out = input.map((item) => {
  const logql = typeof item === "string" ? item : item.logql;
  const tree = parser.parse(logql);
  let error = null;
  const labels = new Set();
  tree.iterate({
    enter(node) {
      if (node.type.isError && error === null)
        error = `syntax error at offset ${node.from}: ...${logql.slice(Math.max(0, node.from - 20), node.from + 20)}...`;
      // Matcher: Identifier op String (stream selector or label filter)
      if (node.name === "Matcher" || node.name === "LabelFilter" || node.name === "Grouping") {
        const text = logql.slice(node.from, node.to);
        for (const m of text.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=|>=|<=|>|<|==)/g)) labels.add(m[1]);
        if (node.name === "Grouping") for (const m of text.matchAll(/[a-zA-Z_][a-zA-Z0-9_]*/g)) if (m[0] !== "by" && m[0] !== "without") labels.add(m[0]);
      }
    },
  });
  if (error) bad++;
  return { name: item.name || null, logql, ok: error === null, error, labels: [...labels].sort() };
});
console.log(JSON.stringify(out, null, 2));
process.exit(bad ? 1 : 0);
