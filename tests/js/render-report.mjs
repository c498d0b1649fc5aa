// Opens a report.html in Debian's headless chromium (driven by playwright-core), saves a
// screenshot, and prints what a user would have seen go wrong: console errors, page errors and
// requests that left the page (a self-contained report makes none).
//   node render-report.mjs REPORT.html SCREENSHOT.png
import { chromium } from "playwright-core";
import { pathToFileURL } from "node:url";

const [html, png] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
});
const problems = [];
try {
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  page.on("console", (m) => { if (m.type() === "error" || m.type() === "warning") problems.push(`console ${m.type()}: ${m.text()}`); });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  const url = pathToFileURL(html).href;
  page.on("request", (r) => { if (r.url() !== url && !r.url().startsWith("data:")) problems.push(`request: ${r.url()}`); });
  await page.goto(url, { waitUntil: "load" });
  const marks = await page.locator("svg circle, svg rect, svg polygon").count();
  const cause = (await page.locator(".cause").innerText()).trim();
  await page.screenshot({ path: png, fullPage: true });
  console.log(JSON.stringify({ problems, marks, cause }));
} finally {
  await browser.close();
}
