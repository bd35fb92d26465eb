// page.mjs - the daemon's status page in a real browser (Debian's
// Chromium, driven by playwright-core): the client table with colored
// state badges, a badge's last_failure and next try, node_states folded,
// a button's action, and live updates from the state stream without a
// reload -
// including a server killed (by this script) turning its badge unstable.
//
// Usage: node page.mjs BASE_URL SCREENSHOT.png PID
// The daemon at BASE_URL serves clients "svst" (healthy, sticky), "dead"
// (its server is down: unstable, stage connect) and "mortal" (sticky,
// checked every second; its server is process group PID).  Prints
// "page ok 1" and exits 0 when every check held; else prints what failed
// and exits 1.
import process from 'node:process';
import { check, launch } from './browser.mjs';

const [base, shot, pid] = process.argv.slice(2);
const mortal = Number(pid);
if (!base || !shot || !Number.isInteger(mortal) || mortal <= 1) {
	process.stderr.write('usage: node page.mjs BASE_URL SCREENSHOT.png PID\n');
	process.exit(2);
}

const browser = await launch();
let code = 0;
try {
	const page = await browser.newPage();
	const wait = { timeout: 20000 };
	await page.goto(base + '/');
	await page.waitForSelector('tr[data-client="svst"] .badge.healthy', wait);
	await page.waitForSelector('#live.on', wait); // the stream is up
	let loaded = await page.evaluate(() => window.mcpkeepLoaded);

	// a badge's colour and its last_failure
	const color = await page.$eval('tr[data-client="svst"] .badge',
		(e) => getComputedStyle(e).backgroundColor);
	check(color === 'rgb(26, 127, 55)', `healthy badge colour ${color}`);
	await page.waitForSelector('tr[data-client="dead"] .badge.unstable', wait);
	await page.click('tr[data-client="dead"] .badge');
	await page.waitForSelector('tr.details[data-client="dead"] .lf-message',
		wait);
	const details = await page.textContent('tr.details[data-client="dead"]');
	check(details.includes('connect'), `details: ${details}`);
	check(/since.*\(for \d+ (s|min|h)\)/.test(details),
		`how long it has been going on: ${details}`);
	// when the next connect is due (the list is read between two
	// attempts: one read during an attempt has none, so read again)
	let retry = '';
	for (let i = 0; i < 5 && !retry; i++) {
		retry = (await page.$eval('tr.details[data-client="dead"]',
			(e) => e.querySelector('.next-retry')?.textContent ?? ''));
		if (!retry) {
			await page.reload();
			await page.waitForSelector('tr[data-client="dead"] .badge',
				wait);
			await page.click('tr[data-client="dead"] .badge');
			await page.waitForSelector(
				'tr.details[data-client="dead"] .lf-message', wait);
		}
	}
	check(/Z \(in \d+ (s|min)\)$/.test(retry), `next try: ${retry}`);
	loaded = await page.evaluate(() => window.mcpkeepLoaded); // (reloads)

	// node_states folded by state and reason, with a count
	const folded = await page.evaluate(() => window.mcpkeepFold({
		a: { state: 'unstable', last_failure: { message: 'context deadline exceeded' } },
		b: { state: 'unstable', last_failure: { message: 'context deadline exceeded' } },
		c: { state: 'unstable', last_failure: { message: 'context deadline exceeded' } },
		d: { state: 'healthy' },
	}));
	check(folded.includes('3 instances: unstable \u2014 context deadline exceeded') &&
		folded.includes('1 instance: healthy'), `folded: ${JSON.stringify(folded)}`);

	// a button acts; the badge follows live
	await page.click('tr[data-client="svst"] button:has-text("disable")');
	await page.waitForSelector('tr[data-client="svst"] .badge.disabled', wait);
	// a change made elsewhere arrives on the stream
	const r = await fetch(base + '/api/mcp/client/svst/enable', { method: 'POST',
		headers: { 'Content-Type': 'application/json' }, body: '{}' });
	check(r.ok, `enable: HTTP ${r.status}`);
	await page.waitForSelector('tr[data-client="svst"] .badge.healthy', wait);
	check(await page.evaluate(() => window.mcpkeepLoaded) === loaded,
		'the page reloaded');
	// a server killed: its badge turns unstable, live
	await page.waitForSelector('tr[data-client="mortal"] .badge.healthy', wait);
	process.kill(-mortal, 'SIGKILL');
	await page.waitForSelector('tr[data-client="mortal"] .badge.unstable',
		{ timeout: 40000 });
	check(await page.evaluate(() => window.mcpkeepLoaded) === loaded,
		'the page reloaded');
	await page.screenshot({ path: shot, fullPage: true });
	process.stdout.write('page ok 1\n');
} catch (e) {
	process.stdout.write(`page check failed: ${e.message}\n`);
	code = 1;
} finally {
	await browser.close();
}
process.exit(code);
