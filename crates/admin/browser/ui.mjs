// Drives `karpenter-capi ui` in a real headless Chromium (Debian's `chromium`) with
// playwright-core: loads every page, runs setup and the CAS hand-off through the forms,
// checks a request without the form token changes nothing, and writes screenshots.
//
// Usage: node ui.mjs <login-url> <resource-id-to-set-up> <screenshot-dir>
// (`npm install playwright-core` next to it first; see crates/admin/browser/README.md)
import { chromium } from 'playwright-core';
import assert from 'node:assert/strict';

const [loginUrl, resourceId, outDir] = process.argv.slice(2);
const base = new URL(loginUrl).origin;
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
const shot = (name) => page.screenshot({ path: `${outDir}/${name}.png`, fullPage: true });
let passed = 0;
const check = (cond, what) => { assert.ok(cond, what); passed++; };

let r = await page.goto(`${base}/`);
check(r.status() === 401, 'overview needs the token');
await page.goto(loginUrl);
check(page.url() === `${base}/`, 'login redirects to the overview');
check(await page.locator('table tr').count() > 1, 'overview lists resources');
await shot('1-overview');

await page.goto(`${base}/resource?id=${encodeURIComponent(resourceId)}`);
check(await page.locator('h2', { hasText: 'Capacity' }).count() === 1, 'detail shows capacity');
await shot('2-resource');

await page.goto(`${base}/setup`);
await page.check(`input[value="${resourceId}"]`);
await page.fill('input[name=price]', '0.25');
await page.fill('input[name=nodepool]', '');
await page.click('button');
check((await page.textContent('#diff')).includes('price-per-hour'), 'setup shows the diff');
await shot('3-setup-diff');
await page.click('#apply');
check((await page.textContent('#done')).includes('updated'), 'setup applied');
await shot('4-setup-done');

await page.goto(`${base}/cas`);
await shot('5-cas');
// A forged form without the token changes nothing.
const forged = await page.evaluate(async () => (await fetch('/cas/disable', { method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, body: 'force=1' })).status);
check(forged === 403, 'a POST without the form token is refused');
await page.click('#disable');
const text = await page.textContent('body');
check(text.includes('scaled cluster-autoscaler') || text.includes('Refused'), 'disable answered');
await shot('6-cas-disabled');
await page.goto(`${base}/cas`);
await page.click('#enable');
check((await page.textContent('#done')).includes('deleted the hand-off record'), 'enable restored');
await shot('7-cas-enabled');
await browser.close();
console.log(`${passed} passed, 0 failed`);
