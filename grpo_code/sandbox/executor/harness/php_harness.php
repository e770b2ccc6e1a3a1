<?php
// grpo-code's PHP harness (docs/languages.md): loads the program from the file named by
// $argv[1], then runs one script test or calls one function with the test's arguments and
// reports the result as data on fd 3. The payload on fd 4: the nonce, then one JSON object.
// The expected value never enters this process.
$__grpo = (function () {
    $text = (string) file_get_contents('php://fd/4');
    // emptied before any program code runs: what opens fd 4 later finds no nonce
    $payload = fopen('php://fd/4', 'r+');
    if ($payload !== false) { ftruncate($payload, 0); fclose($payload); }
    $cut = strpos($text, "\n");
    $nonce = $cut === false ? $text : substr($text, 0, $cut);
    $what = json_decode($cut === false ? '{}' : substr($text, $cut + 1), true, 512, JSON_BIGINT_AS_STRING);
    $out = fopen('php://fd/3', 'w');
    $report = function (string $event, array $extra = []) use ($nonce, $out) {
        $line = '{"nonce":' . json_encode($nonce) . ', "event": ' . json_encode($event);
        foreach ($extra as $k => $v) {
            $line .= ', ' . json_encode($k) . ': ' . $v;
        }
        fwrite($out, $line . "}\n");
        fflush($out);
        exit(0);
    };
    return ['what' => $what, 'report' => $report];
})();

function __grpo_message($text) {
    return json_encode(substr((string) $text, 0, 4000), JSON_INVALID_UTF8_SUBSTITUTE);
}

function __grpo_plain($v) {
    if (!is_array($v)) return $v;
    if (count($v) === 1 && (isset($v['$t']) || isset($v['$s']) || isset($v['$f']))) return array_map('__grpo_plain', array_values($v)[0]);
    if (count($v) === 1 && isset($v['$d'])) {
        $out = [];
        foreach ($v['$d'] as $pair) $out[__grpo_plain($pair[0])] = __grpo_plain($pair[1]);
        return $out;
    }
    return array_map('__grpo_plain', $v);
}

function __grpo_encode($v) {
    if ($v === null) return 'null';
    if (is_bool($v)) return $v ? 'true' : 'false';
    if (is_int($v)) return (string) $v;
    if (is_float($v)) {
        if (is_nan($v)) return 'NaN';
        if (is_infinite($v)) return $v > 0 ? 'Infinity' : '-Infinity';
        $text = json_encode($v, JSON_PRESERVE_ZERO_FRACTION);
        return $text;
    }
    if (is_string($v)) return json_encode($v, JSON_INVALID_UTF8_SUBSTITUTE);
    if (is_array($v)) {
        if (array_is_list($v)) return '[' . implode(', ', array_map('__grpo_encode', $v)) . ']';
        $parts = [];
        $text = true;
        foreach ($v as $k => $x) $text = $text && is_string($k);
        foreach ($v as $k => $x) {
            $parts[] = $text ? json_encode((string) $k) . ': ' . __grpo_encode($x) : '[' . __grpo_encode($k) . ', ' . __grpo_encode($x) . ']';
        }
        return $text ? '{' . implode(', ', $parts) . '}' : '{"$d": [' . implode(', ', $parts) . ']}';
    }
    throw new TypeError('the function returned a ' . get_debug_type($v) . ', which is not plain data');
}

$__grpo_source = (string) ($__grpo['what']['source'] ?? '');
if (!preg_match('/^\s*<\?php/', $__grpo_source)) $__grpo_source = "<?php\n" . $__grpo_source;
try {
    eval('?>' . $__grpo_source);
    if (isset($__grpo['what']['code'])) {
        eval($__grpo['what']['code']);
        ($__grpo['report'])('completed');
    }
    $__grpo_value = (string) $__grpo['what']['fn'];
    $__grpo_value = $__grpo_value(...__grpo_plain($__grpo['what']['args'] ?? []));
    try {
        $__grpo_value = __grpo_encode($__grpo_value);
    } catch (TypeError $e) {
        ($__grpo['report'])('not_plain', ['message' => __grpo_message($e->getMessage())]);
    }
    ($__grpo['report'])('returned', ['value' => $__grpo_value]);
} catch (ParseError $e) {
    ($__grpo['report'])('compile_error', ['message' => __grpo_message($e->getMessage() . ' on line ' . $e->getLine())]);
} catch (Throwable $e) {
    $event = ($e instanceof AssertionError || str_contains($e->getMessage(), 'Test failed')) ? 'assertion' : 'runtime_error';
    ($__grpo['report'])($event, ['message' => __grpo_message(get_class($e) . ': ' . $e->getMessage())]);
}
