import { type BrowserContext, chromium } from '@playwright/test';

/** Debian's Chromium (installed by .ci/run); Playwright's own browser download is not reachable. */
export const CHROMIUM = '/usr/bin/chromium';

/**
 * Debian's Chromium, headless, with a fresh profile in `profileDir`. As root it needs --no-sandbox;
 * without the background-networking flags it keeps dialling Google's hosts on a closed network.
 */
export function launchChromium(
  profileDir: string,
  options: { viewport?: { width: number; height: number } } = {},
): Promise<BrowserContext> {
  return chromium.launchPersistentContext(profileDir, {
    executablePath: CHROMIUM,
    headless: true,
    ...(options.viewport ? { viewport: options.viewport } : {}),
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}
