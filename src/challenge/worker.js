// quagmire's proof of work, in a Web Worker: find a nonce such that SHA-256(challenge + nonce)
// starts with `bits` zero bits. Worker i of k tries nonces i, i + k, i + 2k, ...
// WebCrypto where the page is a secure context (https, localhost); elsewhere a plain SHA-256.
"use strict";
var subtle = self.crypto && self.crypto.subtle;
var encoder = new TextEncoder();

function hasZeros(bytes, bits) {
  var i = 0;
  for (; bits >= 8; bits -= 8, i++) {
    if (bytes[i] !== 0) return false;
  }
  return bits === 0 || (bytes[i] >> (8 - bits)) === 0;
}

// SHA-256 (FIPS 180-4) for short messages, for pages served over plain http, where browsers
// give workers no WebCrypto.
var K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);
var W = new Uint32Array(64);

function rotr(x, n) {
  return (x >>> n) | (x << (32 - n));
}

function sha256(bytes) {
  var length = bytes.length;
  var blocks = (length + 9 + 63) >> 6;
  var message = new Uint8Array(blocks * 64);
  message.set(bytes);
  message[length] = 0x80;
  var bitLength = length * 8;
  var end = blocks * 64;
  message[end - 4] = (bitLength >>> 24) & 0xff;
  message[end - 3] = (bitLength >>> 16) & 0xff;
  message[end - 2] = (bitLength >>> 8) & 0xff;
  message[end - 1] = bitLength & 0xff;
  var h0 = 0x6a09e667, h1 = 0xbb67ae85, h2 = 0x3c6ef372, h3 = 0xa54ff53a;
  var h4 = 0x510e527f, h5 = 0x9b05688c, h6 = 0x1f83d9ab, h7 = 0x5be0cd19;
  for (var block = 0; block < end; block += 64) {
    for (var i = 0; i < 16; i++) {
      var at = block + i * 4;
      W[i] = (message[at] << 24) | (message[at + 1] << 16) | (message[at + 2] << 8) | message[at + 3];
    }
    for (i = 16; i < 64; i++) {
      var x = W[i - 15], y = W[i - 2];
      var s0 = rotr(x, 7) ^ rotr(x, 18) ^ (x >>> 3);
      var s1 = rotr(y, 17) ^ rotr(y, 19) ^ (y >>> 10);
      W[i] = (W[i - 16] + s0 + W[i - 7] + s1) | 0;
    }
    var a = h0, b = h1, c = h2, d = h3, e = h4, f = h5, g = h6, h = h7;
    for (i = 0; i < 64; i++) {
      var t1 = (h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + W[i]) | 0;
      var t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      h = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
    }
    h0 = (h0 + a) | 0; h1 = (h1 + b) | 0; h2 = (h2 + c) | 0; h3 = (h3 + d) | 0;
    h4 = (h4 + e) | 0; h5 = (h5 + f) | 0; h6 = (h6 + g) | 0; h7 = (h7 + h) | 0;
  }
  var out = new Uint8Array(32);
  [h0, h1, h2, h3, h4, h5, h6, h7].forEach(function (word, index) {
    out[index * 4] = word >>> 24;
    out[index * 4 + 1] = (word >>> 16) & 0xff;
    out[index * 4 + 2] = (word >>> 8) & 0xff;
    out[index * 4 + 3] = word & 0xff;
  });
  return out;
}

function searchPlain(job) {
  for (var nonce = job.start; ; nonce += job.step) {
    if (hasZeros(sha256(encoder.encode(job.challenge + nonce)), job.bits)) return nonce;
  }
}

// WebCrypto digests are asynchronous: a batch at a time keeps the worker busy between them.
async function searchSubtle(job) {
  var batch = 128;
  for (var nonce = job.start; ; ) {
    var nonces = [], digests = [];
    for (var k = 0; k < batch; k++, nonce += job.step) {
      nonces.push(nonce);
      digests.push(subtle.digest("SHA-256", encoder.encode(job.challenge + nonce)));
    }
    var results = await Promise.all(digests);
    for (k = 0; k < batch; k++) {
      if (hasZeros(new Uint8Array(results[k]), job.bits)) return nonces[k];
    }
  }
}

self.onmessage = async function (event) {
  var job = event.data;
  var nonce;
  try {
    nonce = subtle ? await searchSubtle(job) : searchPlain(job);
  } catch (error) {
    nonce = searchPlain(job);
  }
  self.postMessage(String(nonce));
};
