// quagmire's proof of work, in a Web Worker: find a nonce such that SHA-256(challenge + nonce)
// starts with `bits` zero bits. Worker i of k tries nonces i, i + k, i + 2k, ...
//
// Plain, synchronous SHA-256 (FIPS 180-4), built for this one message shape rather than for any
// message: the challenge's whole 64-byte blocks are hashed once (the midstate), and each nonce
// costs only the last block, with the nonce's decimal digits counted up in place. No allocation,
// no string, no promise per hash. WebCrypto's digest is asynchronous, one promise and one copy a
// call, and measured several times slower for this than the loop below (bench/challenge-solve.sh);
// it is also missing on plain-http pages, so one path serves both.
"use strict";
var K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);
var IV = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
var W = new Int32Array(64);

// Compresses the 64 bytes of `bytes` at `at` into the state `from`, writing the result to `to`
// (which may be `from`).
function compress(from, to, bytes, at) {
  var i, x, y;
  for (i = 0; i < 16; i++, at += 4) {
    W[i] = (bytes[at] << 24) | (bytes[at + 1] << 16) | (bytes[at + 2] << 8) | bytes[at + 3];
  }
  for (i = 16; i < 64; i++) {
    x = W[i - 15];
    y = W[i - 2];
    W[i] = (W[i - 16] + ((x >>> 7 | x << 25) ^ (x >>> 18 | x << 14) ^ (x >>> 3)) + W[i - 7] +
      ((y >>> 17 | y << 15) ^ (y >>> 19 | y << 13) ^ (y >>> 10))) | 0;
  }
  var a = from[0], b = from[1], c = from[2], d = from[3];
  var e = from[4], f = from[5], g = from[6], h = from[7];
  for (i = 0; i < 64; i++) {
    x = (h + ((e >>> 6 | e << 26) ^ (e >>> 11 | e << 21) ^ (e >>> 25 | e << 7)) +
      ((e & f) ^ (~e & g)) + K[i] + W[i]) | 0;
    y = (((a >>> 2 | a << 30) ^ (a >>> 13 | a << 19) ^ (a >>> 22 | a << 10)) +
      ((a & b) ^ (a & c) ^ (b & c))) | 0;
    h = g; g = f; f = e; e = (d + x) | 0;
    d = c; c = b; b = a; a = (x + y) | 0;
  }
  to[0] = (from[0] + a) | 0; to[1] = (from[1] + b) | 0;
  to[2] = (from[2] + c) | 0; to[3] = (from[3] + d) | 0;
  to[4] = (from[4] + e) | 0; to[5] = (from[5] + f) | 0;
  to[6] = (from[6] + g) | 0; to[7] = (from[7] + h) | 0;
}

// Whether the digest `words` starts with `bits` zero bits.
function hasZeros(words, bits) {
  var i = 0;
  for (; bits >= 32; bits -= 32, i++) {
    if (words[i] !== 0) return false;
  }
  return bits === 0 || (words[i] >>> (32 - bits)) === 0;
}

function search(job) {
  var challenge = job.challenge, step = job.step, bits = job.bits;
  // The token is base64url: one byte a character.
  var prefix = new Uint8Array(challenge.length);
  for (var i = 0; i < prefix.length; i++) prefix[i] = challenge.charCodeAt(i) & 0xff;
  var whole = prefix.length >> 6;
  var midstate = Int32Array.from(IV);
  for (var block = 0; block < whole; block++) compress(midstate, midstate, prefix, block * 64);
  var rest = prefix.length - whole * 64;
  var tail = new Uint8Array(128);
  tail.set(prefix.subarray(whole * 64));
  var digest = new Int32Array(8);
  var digits = String(job.start).split("").map(Number);
  var blocks = 0;

  // Pads the tail for the current number of digits: run again only when that number grows.
  function layout() {
    var length = rest + digits.length;
    tail.fill(0, length);
    tail[length] = 0x80;
    blocks = (length + 9 + 63) >> 6;
    var bitLength = (prefix.length + digits.length) * 8;
    var end = blocks * 64;
    tail[end - 4] = bitLength >>> 24;
    tail[end - 3] = (bitLength >>> 16) & 0xff;
    tail[end - 2] = (bitLength >>> 8) & 0xff;
    tail[end - 1] = bitLength & 0xff;
  }
  layout();

  for (var nonce = job.start; ; nonce += step) {
    for (i = 0; i < digits.length; i++) tail[rest + i] = 48 + digits[i];
    compress(midstate, digest, tail, 0);
    if (blocks === 2) compress(digest, digest, tail, 64);
    if (hasZeros(digest, bits)) return nonce;
    // Counts the decimal digits up by `step` (at most 9), carrying as a person would.
    var at = digits.length - 1;
    var carry = step;
    while (carry > 0) {
      if (at < 0) {
        digits.unshift(carry);
        layout();
        break;
      }
      var sum = digits[at] + carry;
      digits[at] = sum % 10;
      carry = (sum / 10) | 0;
      at--;
    }
  }
}

self.onmessage = function (event) {
  self.postMessage(String(search(event.data)));
};
