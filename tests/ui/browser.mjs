// Drives the admin web UI in a real headless Chromium (Debian's /usr/bin/chromium) with
// playwright-core: every page loads, setup and the CAS hand-off run through the forms, and
// requests without the session or the form token are refused and change nothing.
// Usage: node browser.mjs <login-url> <namespace> <screenshot-dir>
// Run by crates/admin/tests/browser.rs, which creates the cluster objects and checks the
// cluster afterwards. Exits non-zero with a message on the first failed expectation.
import { chromium } from 'playwright-core';

const [loginUrl, ns, shots] = process.argv.slice(2);
const base = new URL(loginUrl).origin;
const chromiumPath = process.env.CHROMIUM || '/usr/bin/chromium';

function expect(cond, what) {
  if (!cond) {
    throw new Error(`expectation failed: ${what}`);
  }
}

const browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox', '--disable-gpu'] });
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const shot = (name) => page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
  const status = async (path) => (await page.goto(base + path)).status();

  // Without logging in: nothing shows.
  expect((await status('/')) === 401, 'overview without the token is 401');
  await page.goto(loginUrl);
  expect(page.url() === base + '/', `login redirects to the overview (at ${page.url()})`);
  const overview = await page.textContent('body');
  expect(overview.includes(`${ns}/plain`), 'overview lists the resource');
  expect(await page.locator('#nodes').count() === 1, 'overview has the nodes table');
  await shot('overview');

  await page.click(`a[href*="${encodeURIComponent(ns)}"]`);
  expect((await page.textContent('h1')).includes(ns), 'resource detail opens');
  expect((await page.textContent('body')).includes('Problems'), 'detail shows problems');
  await shot('resource');

  expect((await status('/events')) === 200, 'decisions and events page loads');
  await shot('events');

  // Requests without the token change nothing: a second context has no session cookie,
  // and with the cookie but without the form token the POST is refused too.
  await page.goto(base + '/cas');
  const casBefore = await page.textContent('#status');
  await shot('cas');
  const anon = await browser.newContext();
  const r1 = await anon.request.post(base + '/cas/disable', { form: { force: '1' }, maxRedirects: 0 });
  expect(r1.status() === 403, `disable without session is 403 (got ${r1.status()})`);
  const r2 = await page.request.post(base + '/cas/disable', { form: { force: '1' }, maxRedirects: 0 });
  expect(r2.status() === 403, `disable without the form token is 403 (got ${r2.status()})`);
  const csrf = await page.getAttribute('input[name=csrf]', 'value');
  const r3 = await page.request.post(base + '/cas/disable', {
    form: { csrf, force: '1' },
    headers: { Origin: 'http://evil.example' },
    maxRedirects: 0,
  });
  expect(r3.status() === 403, `disable from another origin is 403 (got ${r3.status()})`);
  await anon.close();
  await page.goto(base + '/cas');
  expect((await page.textContent('#status')) === casBefore, 'CAS status unchanged after refused requests');

  // Setup through the form: pick the plain resource, price it, review the diff, apply.
  await page.goto(base + '/setup');
  await page.check(`input[name=r][value*="/${ns}/plain"]`);
  await page.fill('input[name=price]', '0.05');
  await page.fill('input[name=nodeclass]', ns);
  await page.fill('input[name=nodepool]', ns);
  await page.click('text=Show the changes');
  const diff = await page.textContent('#diff');
  expect(diff.includes('price-per-hour'), 'setup diff shows the price annotation');
  await shot('setup-diff');
  await page.click('#apply');
  expect((await page.textContent('#done')).includes('plain'), 'setup applied to the resource');
  await shot('setup-applied');

  // CAS hand-off through the forms.
  await page.goto(base + '/cas');
  await page.click('#disable');
  const disabled = await page.textContent('body');
  expect(disabled.includes('scaled cluster-autoscaler'), `disable scaled CAS down: ${disabled}`);
  await shot('cas-disabled');
  await page.goto(base + '/cas');
  await page.click('#enable');
  const enabled = await page.textContent('body');
  expect(enabled.includes('back to 1'), `enable restored CAS: ${enabled}`);
  await shot('cas-enabled');
  console.log('browser: every page and form passed');
} finally {
  await browser.close();
}
