// inputpage.mjs - a person answers an MCP server's elicitation on the
// daemon's status page, in a real browser (Debian's Chromium, driven by
// playwright-core): the request waiting shows as a form built from its
// schema, with the schema's defaults filled in; the person types a name,
// ticks a box and accepts; the request is gone from the page.
//
// Usage: node inputpage.mjs BASE_URL TOKEN SCREENSHOT.png
// The daemon at BASE_URL (admin token TOKEN) has client "asker" with a
// form elicitation waiting (streams.mjs's elicit_form: name default
// "anon", count default 3, ok required).  Prints "inputpage ok 1" and
// exits 0 when every check held; else prints what failed and exits 1.
import process from 'node:process';
import { check, launch } from './browser.mjs';

const [base, token, shot] = process.argv.slice(2);
if (!base || !token || !shot) {
	process.stderr.write('usage: node inputpage.mjs BASE_URL TOKEN SCREENSHOT.png\n');
	process.exit(2);
}

const browser = await launch();
let code = 0;
try {
	const page = await browser.newPage();
	const wait = { timeout: 20000 };
	await page.addInitScript((t) => sessionStorage.setItem('mcpkeep-token', t),
		token);
	await page.goto(base + '/');
	await page.waitForSelector('.input h2', wait);
	const title = await page.$eval('.input h2', (e) => e.textContent);
	check(title === 'asker asks (elicitation/create)', `title ${title}`);
	const text = await page.$eval('.input p', (e) => e.textContent);
	check(text === 'Your name?', `message ${text}`);
	const name = await page.$eval('.input [data-key="name"]', (e) => e.value);
	const count = await page.$eval('.input [data-key="count"]', (e) => e.value);
	check(name === 'anon' && count === '3', `defaults ${name} ${count}`);
	await page.fill('.input [data-key="name"]', 'Ada');
	await page.check('.input [data-key="ok"]');
	await page.screenshot({ path: shot, fullPage: true });
	await page.click('.input button:text("accept")');
	await page.waitForSelector('.input', { state: 'detached', ...wait });
	const msg = await page.$eval('#msg', (e) => e.textContent);
	check(msg === '', `message after answering: ${msg}`);
	process.stdout.write('inputpage ok 1\n');
} catch (e) {
	const pages = browser.contexts().flatMap((c) => c.pages());
	const msg = pages.length > 0
		? await pages[0].$eval('#msg', (m) => m.textContent).catch(() => '?')
		: '?';
	process.stdout.write(`inputpage failed: ${e.message} (page says: ${msg})\n`);
	code = 1;
} finally {
	await browser.close();
}
process.exit(code);
