// xss.mjs - the status page in a real browser (Debian's Chromium, driven
// by playwright-core) against stored XSS: the daemon's client CLIENT is
// an OAuth client whose authorization server's metadata names a
// `javascript:` authorization_endpoint.  Pressing its "verify" button
// must show the daemon's refusal and open nothing, run nothing; the
// page's own opener refuses a javascript: URL; and its
// Content-Security-Policy stops a script injected into the page.
//
// Usage: node xss.mjs BASE_URL CLIENT
// Prints "xss ok 1" and exits 0 when every check held; else prints what
// failed and exits 1.
import process from 'node:process';
import { check, launch } from './browser.mjs';

const [base, client] = process.argv.slice(2);
if (!base || !client) {
	process.stderr.write('usage: node xss.mjs BASE_URL CLIENT\n');
	process.exit(2);
}

const browser = await launch();
let code = 0;
try {
	const page = await browser.newPage();
	let popups = 0;
	let dialogs = 0;
	page.on('popup', () => { popups++; });
	page.on('dialog', (d) => { dialogs++; d.dismiss(); });
	const wait = { timeout: 20000 };
	const res = await page.goto(base + '/');
	const csp = res.headers()['content-security-policy'] ?? '';
	check(csp.includes("script-src 'sha256-") && !csp.includes('unsafe-inline'),
		`the page's CSP: ${csp}`);
	await page.waitForSelector(`tr[data-client="${client}"] .badge.pending_verification`,
		wait);
	await page.click(`tr[data-client="${client}"] button:has-text("verify")`);
	await page.waitForFunction(() =>
		document.getElementById('msg').textContent.includes('verify:'), null, wait);
	const msg = await page.$eval('#msg', (e) => e.textContent);
	console.log(`message: ${msg}`);
	check(msg.includes('not an http(s) URL'), `the refusal shown: ${msg}`);
	// the page's own opener, given the URL straight
	const opened = await page.evaluate(() => {
		try {
			window.mcpkeepOpen('javascript:alert(document.title)');
			return 'opened';
		} catch (e) {
			return 'refused: ' + e.message;
		}
	});
	check(opened.startsWith('refused'), `mcpkeepOpen(javascript:): ${opened}`);
	// a script injected into the page does not run
	await page.evaluate(() => {
		const s = document.createElement('script');
		s.textContent = 'window.pwned = 1;';
		document.body.append(s);
	});
	check(await page.evaluate(() => window.pwned) === undefined,
		'an injected inline script ran');
	check(popups === 0, `${popups} windows opened`);
	check(dialogs === 0, `${dialogs} dialogs shown`);
	console.log('xss ok 1');
} catch (e) {
	console.log(`xss check failed: ${e.message}`);
	code = 1;
} finally {
	await browser.close();
}
process.exit(code);
