/** vtnode's version, advertised to peers and recorded in fingerprints. */
export const VTNODE_VERSION = '0.1.0';
