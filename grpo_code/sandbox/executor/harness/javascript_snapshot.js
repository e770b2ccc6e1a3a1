// Entry of the V8 startup snapshot the JavaScript runner builds once per worker and heap
// size (`node --build-snapshot`): node's bootstrap plus the modules the harness loads
// first, so a test process starts from memory instead of compiling them again. It holds
// no state of any job.
'use strict';
require('assert');
require('fs');
require('path');
