// browser.mjs - what the page's tests share: Debian's Chromium,
// headless (playwright-core), with the flags every one of them runs it
// with plus its own; and check, which fails the script with what did not
// hold.
import process from 'node:process';
import { chromium } from 'playwright-core';

export function launch(extra = []) {
	return chromium.launch({
		executablePath: process.env.MK_CHROMIUM ?? '/usr/bin/chromium',
		args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-quic',
			'--no-first-run', '--disable-background-networking',
			'--disable-component-update', '--disable-sync', ...extra],
	});
}

export function check(cond, what) {
	if (!cond) {
		throw new Error(what);
	}
}
