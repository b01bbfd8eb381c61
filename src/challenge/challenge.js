// quagmire's challenge page: runs the proof of work in Web Workers (one per core, up to four),
// then goes to the answer path, which sets the pass and sends the browser back to its page.
// Without workers it falls back to the wait the page's no-script path uses.
(function () {
  "use strict";
  var box = document.getElementById("quagmire-challenge");
  var status = document.getElementById("quagmire-status");
  var answer = box.getAttribute("data-answer");
  var wait = Number(box.getAttribute("data-wait"));
  var job = { challenge: box.getAttribute("data-challenge"), bits: Number(box.getAttribute("data-difficulty")) };
  var started = Date.now();
  var workers = [];
  var finished = false;

  function say(text) {
    status.textContent = text;
  }

  function go(url) {
    if (finished) return;
    finished = true;
    workers.forEach(function (worker) { worker.terminate(); });
    say("Done. Taking you to the page now.");
    location.replace(url);
  }

  function waitInstead() {
    if (finished) return;
    workers.forEach(function (worker) { worker.terminate(); });
    workers = [];
    say("Your browser could not run the check, so this takes " + wait + " seconds instead. The page continues by itself.");
    setTimeout(function () { go(answer); }, wait * 1000 + 500);
  }

  var count = Math.max(1, Math.min(4, navigator.hardwareConcurrency || 2));
  try {
    for (var i = 0; i < count; i++) {
      var worker = new Worker(box.getAttribute("data-worker"));
      worker.onmessage = function (event) { go(answer + "&n=" + encodeURIComponent(event.data)); };
      worker.onerror = waitInstead;
      worker.postMessage({ challenge: job.challenge, bits: job.bits, start: i, step: count });
      workers.push(worker);
    }
  } catch (error) {
    waitInstead();
    return;
  }
  say("Checking your browser. This usually takes a second or two.");
  setInterval(function () {
    if (finished || workers.length === 0) return;
    var seconds = Math.round((Date.now() - started) / 1000);
    if (seconds >= 3) say("Still checking (" + seconds + " seconds). Slower devices take longer; please keep this page open.");
  }, 1000);
})();
