// cluster_page.mjs - the daemon's status page, in a real browser, on one
// node of three (cluster_test.c): the client "svc" that node c cannot
// reach shows degraded, and its details fold the nodes' states by state
// and reason, with a count.
//
// Usage: node cluster_page.mjs BASE_URL SCREENSHOT.png
// Prints "cluster page ok 1" and exits 0 when every check held; else
// prints what failed and exits 1.
import process from 'node:process';
import { check, launch } from './browser.mjs';

const [base, shot] = process.argv.slice(2);
if (!base || !shot) {
	process.stderr.write('usage: node cluster_page.mjs BASE_URL SCREENSHOT.png\n');
	process.exit(2);
}

const browser = await launch();
let code = 0;
try {
	const page = await browser.newPage();
	const wait = { timeout: 30000 };
	await page.goto(base + '/');
	// (read where it is found: the page renders its rows again as
	// states stream in, and a row replaced between a wait and a read
	// gave an empty colour, seen once under the thread sanitizer)
	const color = await (await page.waitForFunction(() => {
		const e = document.querySelector(
			'tr[data-client="svc"] .badge.degraded');
		return e !== null ? getComputedStyle(e).backgroundColor : '';
	}, null, wait)).jsonValue();
	check(color === 'rgb(130, 80, 223)', `degraded badge colour ${color}`);
	await page.click('tr[data-client="svc"] .badge');
	await page.waitForSelector('tr.details[data-client="svc"] .node', wait);
	const lines = await page.$$eval('tr.details[data-client="svc"] .node',
		(ns) => ns.map((n) => n.textContent));
	check(lines.includes('2 instances: healthy'), `folded: ${JSON.stringify(lines)}`);
	check(lines.some((l) => l.startsWith('1 instance: unstable \u2014 ') &&
		l.includes('Couldn\'t connect')), `folded: ${JSON.stringify(lines)}`);
	check(lines.length === 2, `folded: ${JSON.stringify(lines)}`);
	await page.screenshot({ path: shot, fullPage: true });
	process.stdout.write('cluster page ok 1\n');
} catch (e) {
	process.stdout.write(`cluster page check failed: ${e.message}\n`);
	code = 1;
} finally {
	await browser.close();
}
process.exit(code);
