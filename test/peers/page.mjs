// page.mjs - the daemon's status page in a real browser (Debian's
// Chromium, driven by playwright-core): the client table with colored
// state badges, a badge's last_failure and next try, node_states folded,
// a button's action, and live updates from the state stream without a
// reload -
// including a server killed (by this script) turning its badge unstable;
// the header (node, readiness, store, version), each client's transport,
// mode, protocol and tools (allowed of discovered, "allows no tools", the
// names in the details), its recent transitions, its calls of the last 5
// minutes as a sparkline with rate and error rate, when it was checked and
// is checked next, its tool list's last change (a description rewritten
// on the server, held until approved with the page's button), and 1,003
// clients paged 50 at a time and filtered by the search box.
//
// Usage: node page.mjs BASE_URL SCREENSHOT.png PID PORT
// The daemon at BASE_URL serves clients "svst" (healthy, sticky, allows no
// tools), "dead" (its server is down: unstable, stage connect), "mortal"
// (sticky, checked every second, allows echo, holds changed tools; its
// server is process group PID, inject.mjs on PORT) and zz0000 to zz0999
// (disabled).  Prints
// "page ok 1" and exits 0 when every check held; else prints what failed
// and exits 1.
import process from 'node:process';
import { check, launch } from './browser.mjs';

const [base, shot, pid, port] = process.argv.slice(2);
const mortal = Number(pid);
if (!base || !shot || !Number.isInteger(mortal) || mortal <= 1 || !port) {
	process.stderr.write('usage: node page.mjs BASE_URL SCREENSHOT.png PID PORT\n');
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

	// the header: this node, ready, its store, the version
	await page.waitForSelector('#node[data-store]', wait);
	const node = await page.textContent('#node');
	check(/^node \S+ · ready · store (memory|healthy) · mcpkeep \d/.test(node),
		`header: ${node}`);
	// a row: transport, mode, protocol, tools
	const row = await page.$$eval('tr[data-client="svst"] td',
		(tds) => tds.map((t) => t.textContent));
	check(row[2] === 'http' && row[3] === 'sticky' && /^20\d\d-/.test(row[4]),
		`svst's row: ${JSON.stringify(row)}`);
	check(/allows no tools/.test(row[6]), `svst's tools: ${row[6]}`);
	await page.waitForSelector('tr[data-client="mortal"] .badge.healthy', wait);
	const mtools = await page.textContent('tr[data-client="mortal"] .toolcount');
	check(/^1 of \d+ allowed$/.test(mtools), `mortal's tools: ${mtools}`);
	// 1,003 clients: 50 rows a page; the filter narrows, paging moves
	const info = await page.textContent('#pageinfo');
	check(info === '1003 of 1003 clients · page 1/21', `paging: ${info}`);
	check((await page.$$('#rows > tr:not(.details)')).length === 50,
		'50 rows on a page');
	await page.fill('#search', 'zz099');
	check(await page.textContent('#pageinfo') ===
		'10 of 1003 clients · page 1/1', 'filtered');
	await page.fill('#search', 'mortal echo');
	check((await page.$$('#rows > tr:not(.details)')).length === 1 &&
		(await page.$('tr[data-client="mortal"]')) !== null, 'by tool');
	await page.fill('#search', '');
	await page.click('#next');
	check((await page.textContent('#pageinfo')).endsWith('page 2/21'),
		'next page');
	await page.click('#prev');

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
	// its recent transitions (GET .../history)
	await page.waitForSelector(
		'tr.details[data-client="dead"] .timeline li', wait);
	const tl = await page.textContent(
		'tr.details[data-client="dead"] .timeline');
	check(/\(new\) → unstable +\(connect: /.test(tl), `timeline: ${tl}`);
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
	// calls: 3 echo calls and one refused (a tool it does not allow) make
	// the sparkline, the rate and 25% errors (the page reads the list
	// every 5 s; the counters reach it within a second)
	await page.waitForSelector('tr[data-client="mortal"] .badge.healthy', wait);
	for (const tool of ['echo', 'echo', 'echo', 'add']) {
		const c = await fetch(base + '/api/mcp/tool/execute', {
			method: 'POST', headers: { 'Content-Type': 'application/json' },
			body: JSON.stringify({ client: 'mortal', tool,
				arguments: { message: 'hi', a: 1, b: 2 } }) });
		check(c.status === (tool === 'echo' ? 200 : 400),
			`${tool}: HTTP ${c.status}`);
	}
	await page.waitForSelector(
		'tr[data-client="mortal"] td.calls[data-calls="4"][data-errors="1"]',
		wait);
	const calls = await page.textContent('tr[data-client="mortal"] td.calls');
	check(/^0\.01\/s · 25% errors$/.test(calls), `mortal's calls: ${calls}`);
	check((await page.$$('tr[data-client="mortal"] td.calls svg rect.ok')).length >= 1 &&
		(await page.$$('tr[data-client="mortal"] td.calls svg rect.bad')).length >= 1,
		'the sparkline has bars, the failed call red');
	const checked = await page.textContent('tr[data-client="mortal"] td.checked');
	check(/^\d+ s ago · next in \d s$/.test(checked), `checked: ${checked}`);
	// the server rewrites a tool's description: the row says what
	// changed, the details show the diff
	const d = await fetch(`http://127.0.0.1:${port}/admin/describe`, {
		method: 'POST', body: JSON.stringify({ description: 'rewritten' }) });
	check(d.ok, `describe: HTTP ${d.status}`);
	await page.waitForSelector('tr[data-client="mortal"] .changed', wait);
	const changed = await page.textContent('tr[data-client="mortal"] .changed');
	check(/^changed \d+ s ago: echo description$/.test(changed),
		`changed: ${changed}`);
	await page.click('tr[data-client="mortal"] .badge');
	await page.waitForSelector('tr.details[data-client="mortal"] .diff', wait);
	const diff = await page.textContent('tr.details[data-client="mortal"] .diff');
	check(diff === '~ echo: description', `diff: ${diff}`);
	// mortal holds changed tools (tool_changes hold): shown, then
	// approved with the button
	const held = await page.textContent('tr[data-client="mortal"] .held');
	check(held === '1 held for approval', `held: ${held}`);
	const hl = await page.textContent('tr.details[data-client="mortal"] .heldlist');
	check(hl === 'echo: description changed', `held list: ${hl}`);
	await page.click('tr.details[data-client="mortal"] button:has-text("approve list")');
	await page.waitForSelector('tr[data-client="mortal"] .held',
		{ state: 'detached', timeout: 20000 });
	// a server killed: its badge turns unstable, live
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
