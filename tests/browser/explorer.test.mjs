// tests/browser/explorer.test.mjs: checks the attention explorer pages in headless Chromium
// (Debian's /usr/bin/chromium driven by playwright-core). Run by tests/browser/run, which writes
// the pages and the reference dumps into OUT:
//   node tests/browser/explorer.test.mjs OUT /path/to/attnmap
// Reference values come from the .npy dumps of the same checkpoints (./attnmap's npy path, read
// here with a parser of our own) and from metrics.jsonl; the page's data are never the reference.
// Checks:
//   1. compare.html loads with no console error or page error, and shows both runs;
//   2. for every layer/head and several query tokens, hovering a query token in pane 1 gives
//      every key token of both panes a weight (data-w) within one quantisation step of the .npy
//      value of that row, step = (max(0, max a) - min(0, min a)) / 255; later tokens have none;
//   3. the row-sum statement says "do NOT sum to 1" exactly when some .npy row sum is off 1;
//      each thumbnail's tooltip shows the head's raw sink weight (sink_mass_raw) of the .npy;
//   4. the step slider shows metrics.jsonl's alpha0 of the selected head at the chosen step;
//   5. a page made from a .npy whose one row was moved by 3 steps fails check 2 on exactly
//      that row (the comparison can fail), and the single-run page passes it;
//   6. screenshots OUT/explorer.png (compare view) and OUT/explorer_single.png are written;
//   7. the large map's axes name the tokens (every k-th, k = ceil(T / 16)): each query label
//      sits beside its row and each key label below its column of the drawn map, with the token
//      as the sidecar spells it; the training table has a caption that says what alpha0 and H are;
//   8. a run shorter than metrics_every says its diagnostics are at one step and draws a point;
//      a page without metrics.jsonl says why it has no training panel.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../..");
const { chromium } = require(path.join(root, "build-browser/node_modules/playwright-core"));

const [OUT, ATTNMAP] = process.argv.slice(2);
if (!OUT || !ATTNMAP) {
  console.error("usage: node tests/browser/explorer.test.mjs OUT ATTNMAP");
  process.exit(2);
}
let passed = 0, failed = 0;
function check(cond, what) {
  if (cond) passed++;
  else { failed++; console.error("FAIL: " + what); }
}

// ---- .npy v1-3, '<f4', C order (what ./attnmap writes without --fp16)
function readNpy(file) {
  const b = fs.readFileSync(file);
  if (b.toString("latin1", 0, 6) !== "\x93NUMPY") throw new Error(`${file}: not a .npy file`);
  const major = b[6], hl = major === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const off = major === 1 ? 10 : 12, hdr = b.toString("latin1", off, off + hl);
  if (!/'descr': '<f4'/.test(hdr) || !/'fortran_order': False/.test(hdr))
    throw new Error(`${file}: expected '<f4' in C order: ${hdr}`);
  const shape = hdr.match(/'shape': \(([^)]*)\)/)[1].split(",").filter(s => s.trim()).map(Number);
  const n = shape.reduce((a, c) => a * c, 1), start = off + hl;
  const data = new Float32Array(b.buffer.slice(b.byteOffset + start, b.byteOffset + start + 4 * n));
  return { shape, data };
}
function row(npy, li, hi, t) {
  const [, H, T] = npy.shape;
  const o = ((li * H + hi) * T + t) * T;
  return Array.from(npy.data.subarray(o, o + t + 1));
}
function qstep(r) { // the quantisation step of one causal row, from its definition
  let mn = 0, mx = 0;
  for (const v of r) { mn = Math.min(mn, v); mx = Math.max(mx, v); }
  return (mx - mn) / 255;
}

async function openPage(ctx, file) {
  const page = await ctx.newPage(), errors = [];
  page.on("console", m => { if (m.type() === "error") errors.push(m.text()); });
  page.on("pageerror", e => errors.push(String(e)));
  await page.setViewportSize({ width: 1500, height: 1100 });
  await page.goto("file://" + path.resolve(file));
  await page.waitForSelector("body[data-ready]", { timeout: 60000 });
  const ready = await page.evaluate(() => document.body.dataset.ready);
  return { page, errors, ready };
}

// Hover query t of pane 0 after selecting (layer, head) there; return per pane the data-w of
// tokens 0..T-1 (null where absent).
async function hoverWeights(page, layer, head, t) {
  await page.click(`.pane[data-run="0"] .thumb[data-layer="${layer}"][data-head="${head}"]`);
  await page.hover(`.pane[data-run="0"] .tok[data-t="${t}"]`);
  return page.evaluate(() => Array.from(document.querySelectorAll(".pane")).map(p =>
    Array.from(p.querySelectorAll(".tok")).map(s => s.hasAttribute("data-w") ? Number(s.dataset.w) : null)));
}

// Compare the weights of every (layer, head) and the chosen queries with the .npy rows; returns
// the mismatching rows as "pane/layer/head/t".
async function compareWithNpy(page, npys, sidecars, queries) {
  const bad = [];
  const sc = sidecars[0];
  for (let li = 0; li < sc.layers.length; li++)
    for (let hi = 0; hi < sc.heads.length; hi++)
      for (const t of queries) {
        const got = await hoverWeights(page, sc.layers[li], sc.heads[hi], t);
        check(got.length === npys.length, `${npys.length} panes answer the hover`);
        npys.forEach((npy, p) => {
          const ref = row(npy, li, hi, t), step = qstep(ref), w = got[p];
          let ok = w.length === sidecars[p].tokens.length;
          for (let j = 0; j < w.length && ok; j++)
            ok = j <= t ? w[j] !== null && Math.abs(w[j] - ref[j]) <= step + 1e-6 : w[j] === null;
          if (!ok) bad.push(`${p}/${sc.layers[li]}/${sc.heads[hi]}/${t}`);
        });
      }
  return bad;
}

const profile = fs.mkdtempSync(path.join(os.tmpdir(), "attnlab-chromium-"));
const ctx = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const names = ["softmax", "softpick"];
  const npys = names.map(n => readNpy(path.join(OUT, `maps_${n}.npy`)));
  const sidecars = names.map(n => JSON.parse(fs.readFileSync(path.join(OUT, `maps_${n}.json`), "utf8")));
  const T = sidecars[0].tokens.length, queries = [0, 1, Math.floor(T / 2), T - 1];

  // 1-4: the compare page
  const c = await openPage(ctx, path.join(OUT, "compare.html"));
  check(c.ready === "1", "compare.html finished loading (data-ready=1, got " + c.ready + ")");
  check(c.errors.length === 0, "no console errors on compare.html: " + c.errors.join(" | "));
  const panes = await c.page.$$eval(".pane", ps => ps.map(p => ({
    variant: p.querySelector(".variant").textContent, thumbs: p.querySelectorAll(".thumb").length,
    toks: Array.from(p.querySelectorAll(".tok")).map(s => s.textContent),
    rowsumOff: p.querySelector(".rowsum").classList.contains("off") })));
  check(panes.length === 2, "the compare view shows two panes");
  panes.forEach((p, i) => {
    check(p.variant.includes("variant " + sidecars[i].variant), `pane ${i} names its variant ${sidecars[i].variant}`);
    check(p.thumbs === sidecars[i].layers.length * sidecars[i].heads.length, `pane ${i} has a thumbnail per head`);
    const want = sidecars[i].token_strings.map(s => s.replace(/\n/g, "\u21b5"));
    check(JSON.stringify(p.toks) === JSON.stringify(want), `pane ${i} shows the tokens as split`);
    let off = false; // independently: does any .npy row sum differ from 1?
    const [L, H, TT] = npys[i].shape;
    for (let li = 0; li < L; li++) for (let hi = 0; hi < H; hi++) for (let t = 0; t < TT; t++)
      off ||= Math.abs(row(npys[i], li, hi, t).reduce((a, v) => a + v, 0) - 1) > 1e-3;
    check(p.rowsumOff === off, `pane ${i} states whether rows sum to 1 (npy says off=${off})`);
  });
  // the thumbnails' raw sink weight (metrics.jsonl's sink_mass_raw, the page's statistic of the
  // same name): independently, the mean over rows t >= 1 of the .npy's a[t][0]
  const titles = await c.page.$$eval(".pane", ps => ps.map(p =>
    Array.from(p.querySelectorAll(".thumb")).map(t => t.title)));
  titles.forEach((ts, i) => {
    const [L, H, TT] = npys[i].shape;
    for (let li = 0; li < L; li++) for (let hi = 0; hi < H; hi++) {
      let want = 0;
      for (let t = 1; t < TT; t++) want += row(npys[i], li, hi, t)[0] / (TT - 1);
      const m = /raw sink weight ([0-9.]+)/.exec(ts[li * H + hi]);
      check(m && Math.abs(Number(m[1]) - want) <= 6e-5,
        `pane ${i} L${li} h${hi} shows raw sink weight ${want.toFixed(4)}: ${m ? m[1] : ts[li * H + hi]}`);
    }
  });
  const bad = await compareWithNpy(c.page, npys, sidecars, queries);
  check(bad.length === 0, "hovered weights equal the .npy rows within one step; mismatches: " + bad.join(", "));
  const info = await c.page.$$eval(".pane .info", es => es.map(e => e.textContent));
  check(info.every(s => /query \d+ .*row sum/.test(s)), "both panes state the hovered row's sum");

  // 4: the step slider against metrics.jsonl
  const steps = await c.page.$$eval(".pane[data-run='0'] .step-slider", s => s.length);
  check(steps === 1, "pane 0 has the metrics step slider");
  const lines = fs.readFileSync(path.join(OUT, "run_softmax/metrics.jsonl"), "utf8").split("\n")
    .filter(l => l.includes('"kind":"head"')).map(l => JSON.parse(l));
  const hsteps = [...new Set(lines.map(o => o.step))].sort((a, b) => a - b);
  check(hsteps.length >= 2, "the run logged head records at several steps");
  const s0 = hsteps[0], l0 = sidecars[0].layers[1], h0 = sidecars[0].heads[1];
  await c.page.click(`.pane[data-run="0"] .thumb[data-layer="${l0}"][data-head="${h0}"]`);
  await c.page.$eval(".pane[data-run='0'] .step-slider", el => { el.value = 0; el.dispatchEvent(new Event("input")); });
  const lab = await c.page.$eval(".pane[data-run='0'] .step-label", e => e.textContent);
  check(lab.includes("step " + s0), `the slider label shows step ${s0}: ${lab}`);
  const rec = lines.find(o => o.step === s0 && o.layer === l0 && o.head === h0);
  const cell = await c.page.$eval(`.pane[data-run='0'] .train table`, (tab, [li, hi]) =>
    tab.rows[1 + li].cells[1 + hi].textContent, [1, 1]);
  check(cell.startsWith(rec.alpha0.toFixed(2) + " / " + rec.entropy.toFixed(2)),
    `training table at step ${s0} shows alpha0/entropy of L${l0} h${h0}: ${cell}`);
  // 7: axis labels of the large map, placed at their rows and columns
  const ax = await c.page.$eval(".pane[data-run='0'] .bigwrap", w => {
    const cv = w.querySelector("canvas.bigmap").getBoundingClientRect();
    const box = e => { const b = e.getBoundingClientRect(); return { x: b.left, y: b.top, w: b.width, h: b.height }; };
    return { cv: { x: cv.left + 1, y: cv.top + 1, w: cv.width - 2, h: cv.height - 2 },
      q: Array.from(w.querySelectorAll(".qlab")).map(e => ({ t: +e.dataset.t, text: e.textContent, b: box(e) })),
      k: Array.from(w.querySelectorAll(".klab")).map(e => ({ j: +e.dataset.j, text: e.textContent, b: box(e) })) };
  });
  const kstep = Math.ceil(T / 16), want = [];
  for (let t = 0; t < T; t += kstep) want.push(t);
  check(JSON.stringify(ax.q.map(o => o.t)) === JSON.stringify(want) &&
    JSON.stringify(ax.k.map(o => o.j)) === JSON.stringify(want), `axis labels at every ${kstep}th token: ${ax.q.map(o => o.t)}`);
  const shown = t => { const s = sidecars[0].token_strings[t].replace(/\n/g, "\u21b5").replace(/ /g, "\u2423");
    return `${t} ${s.length > 8 ? s.slice(0, 7) + "\u2026" : s}`; };
  const rowH = ax.cv.h / T;
  for (const o of ax.q) {
    const mid = o.b.y + o.b.h / 2, row = ax.cv.y + (o.t + 0.5) * rowH;
    check(o.text === shown(o.t), `query label ${o.t} reads ${JSON.stringify(shown(o.t))}: ${JSON.stringify(o.text)}`);
    check(Math.abs(mid - row) <= rowH / 2 + 1 && o.b.x + o.b.w <= ax.cv.x + 1,
      `query label ${o.t} is left of its row (label centre ${mid.toFixed(1)}, row ${row.toFixed(1)})`);
  }
  for (const o of ax.k) { // rotated 60 degrees about its top-left corner: that corner is its column
    const col = ax.cv.x + (o.j + 0.5) * (ax.cv.w / T);
    check(o.text === shown(o.j), `key label ${o.j} reads ${JSON.stringify(shown(o.j))}`);
    check(Math.abs(o.b.x - col) <= ax.cv.w / T / 2 + 2 && o.b.y >= ax.cv.y + ax.cv.h,
      `key label ${o.j} starts below its column (x ${o.b.x.toFixed(1)}, column ${col.toFixed(1)})`);
  }
  const cap = await c.page.$eval(".pane[data-run='0'] .train table caption", e => e.textContent);
  check(cap.includes(`Step ${s0}`) && cap.includes("alpha0 = the sink weight") && cap.includes("H = the attention entropy"),
    "the training table's caption explains alpha0 and H: " + cap);
  await c.page.hover(`.pane[data-run="0"] .tok[data-t="${T - 1}"]`);
  await c.page.screenshot({ path: path.join(OUT, "explorer.png"), fullPage: true });
  check(fs.statSync(path.join(OUT, "explorer.png")).size > 10000, "screenshot explorer.png written");
  await c.page.close();

  // 5: the single-run page passes, a page of perturbed data fails on exactly the moved row
  const s = await openPage(ctx, path.join(OUT, "single.html"));
  check(s.ready === "1" && s.errors.length === 0, "single.html loads without errors: " + s.errors.join(" | "));
  check((await s.page.$$(".pane")).length === 1, "single.html shows one pane");
  const sbad = await compareWithNpy(s.page, [npys[0]], [sidecars[0]], queries);
  check(sbad.length === 0, "single page matches the .npy: " + sbad.join(", "));
  await s.page.screenshot({ path: path.join(OUT, "explorer_single.png"), fullPage: true });
  await s.page.close();

  // 8: the training panel's notes
  const sh = await openPage(ctx, path.join(OUT, "short.html"));
  check(sh.ready === "1" && sh.errors.length === 0, "short.html loads without errors: " + sh.errors.join(" | "));
  const shortNote = await sh.page.$eval(".pane .train .train-why", e => e.textContent);
  check(shortNote.includes("Diagnostics at one step only (4)"), "a 4-step run says its diagnostics are at one step: " + shortNote);
  const dots = await sh.page.$$eval(".pane .train svg circle", cs => cs.length);
  check(dots === 2, `the one step is drawn as a point per series (${dots} circles)`);
  await sh.page.close();
  const nm = await openPage(ctx, path.join(OUT, "nometrics.html"));
  check(nm.ready === "1" && nm.errors.length === 0, "nometrics.html loads without errors: " + nm.errors.join(" | "));
  const nmNote = await nm.page.$eval(".pane .train-why", e => e.textContent);
  check(nmNote.startsWith("No training panel: this page has no metrics.jsonl"), "a page without metrics.jsonl says why: " + nmNote);
  check((await nm.page.$$(".pane .step-slider")).length === 0, "and has no step slider");
  await nm.page.close();

  const pert = readNpy(path.join(OUT, "maps_softmax.npy")), [, H, TT] = pert.shape;
  const tq = Math.floor(T / 2), step = qstep(row(npys[0], 0, 0, tq));
  pert.data[((0 * H + 0) * TT + tq) * TT + 0] += 3 * step;
  const hdr = fs.readFileSync(path.join(OUT, "maps_softmax.npy")).subarray(0, 128);
  const hl = hdr.readUInt16LE(8) + 10;
  fs.writeFileSync(path.join(OUT, "maps_perturbed.npy"),
    Buffer.concat([hdr.subarray(0, hl), Buffer.from(pert.data.buffer)]));
  fs.copyFileSync(path.join(OUT, "maps_softmax.json"), path.join(OUT, "maps_perturbed.json"));
  execFileSync(ATTNMAP, ["html", "--maps", path.join(OUT, "maps_perturbed"), "-o",
    path.join(OUT, "perturbed.html")], { stdio: "ignore" });
  const p = await openPage(ctx, path.join(OUT, "perturbed.html"));
  const pbad = await compareWithNpy(p.page, [npys[0]], [sidecars[0]], queries);
  check(pbad.length === 1 && pbad[0] === `0/${sidecars[0].layers[0]}/${sidecars[0].heads[0]}/${tq}`,
    "data moved by 3 steps on one row fail the comparison on that row only: " + pbad.join(", "));
  await p.page.close();
} finally {
  await ctx.close();
  fs.rmSync(profile, { recursive: true, force: true });
}
console.log(`browser: ${passed} checks passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
