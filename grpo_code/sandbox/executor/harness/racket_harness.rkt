#lang racket/base
;; grpo-code's Racket harness (docs/languages.md): reads the program from the file named by
;; the first argument and the payload on fd 4 (the nonce, then one JSON object); a script
;; test is appended to the program, the module is declared and run with rackunit's failures
;; reported as the test's failure; a call looks the function up in the program's module and
;; reports the result as data on fd 3. The expected value never enters this process.
(require json racket/port racket/string racket/list racket/math rackunit)

(define text (call-with-input-file "/proc/self/fd/4" port->string))
;; emptied before any program code runs: what opens fd 4 later finds no nonce
(call-with-output-file "/proc/self/fd/4" void #:exists 'truncate)
(define cut (or (for/first ([c (in-string text)] [i (in-naturals)] #:when (char=? c #\newline)) i) (string-length text)))
(define nonce (substring text 0 cut))
(define what (string->jsexpr (if (< cut (string-length text)) (substring text (add1 cut)) "{}")))
(define out (open-output-file "/proc/self/fd/3" #:exists 'append))
(define exit* (exit-handler))  ; the process's own: the program's (exit) goes through the one set below

(define (report event [extra '()])
  (write-string (string-append "{\"nonce\":" (jsexpr->string nonce) ", \"event\": " (jsexpr->string event)
                               (apply string-append (for/list ([kv extra]) (string-append ", \"" (car kv) "\": " (cdr kv))))
                               "}\n") out)
  (flush-output out)
  (exit* 0))

(define (message v) (jsexpr->string (let ([s (format "~a" v)]) (substring s 0 (min 4000 (string-length s))))))

(define (plain v)
  (cond [(and (hash? v) (= (hash-count v) 1) (for/or ([k '($t $s $f)]) (hash-ref v k #f)))
         => (λ (items) (map plain items))]
        [(and (hash? v) (= (hash-count v) 1) (string? (hash-ref v '$i #f)))
         (string->number (string-replace (hash-ref v '$i) "0x" "") 16)]
        [(and (hash? v) (= (hash-count v) 1) (hash-ref v '$d #f))
         => (λ (pairs) (for/hash ([p pairs]) (values (plain (first p)) (plain (second p)))))]
        [(list? v) (map plain v)]
        [(hash? v) (for/hash ([(k x) v]) (values (symbol->string k) (plain x)))]
        [(eq? v (json-null)) 'null]
        [else v]))

(define (encode v)
  (cond [(boolean? v) (if v "true" "false")]
        [(void? v) "null"]
        [(exact-integer? v) (number->string v)]
        [(and (real? v) (nan? (exact->inexact v))) "NaN"]
        [(and (real? v) (infinite? v)) (if (> v 0) "Infinity" "-Infinity")]
        [(real? v) (number->string (exact->inexact v))]
        [(string? v) (jsexpr->string v)]
        [(char? v) (jsexpr->string (string v))]
        [(symbol? v) (jsexpr->string (symbol->string v))]
        [(vector? v) (encode (vector->list v))]
        [(list? v) (string-append "[" (string-join (map encode v) ", ") "]")]
        [(pair? v) (string-append "[" (encode (car v)) ", " (encode (cdr v)) "]")]
        [(hash? v)
         (if (for/and ([k (in-hash-keys v)]) (string? k))
             (string-append "{" (string-join (for/list ([(k x) v]) (string-append (jsexpr->string k) ": " (encode x))) ", ") "}")
             (string-append "{\"$d\": [" (string-join (for/list ([(k x) v]) (string-append "[" (encode k) ", " (encode x) "]")) ", ") "]}"))]
        [else (raise (exn:fail:contract (format "the function returned ~a, which is not plain data" v) (current-continuation-marks)))]))


(define (failed event) (λ (e) (report (if (exn:fail:out-of-memory? e) "memory" event)
                                       (if (exn? e) (list (cons "message" (message (exn-message e)))) '()))))

(define program (call-with-input-file (vector-ref (current-command-line-arguments) 0) port->string))
(define code (hash-ref what 'code #f))
(define source (if code (string-append program "\n" code "\n") program))
(define ns (make-base-namespace))
(define-namespace-anchor here)
;; one rackunit for the harness and the test, so the check handler set below is the test's
(namespace-attach-module (namespace-anchor->namespace here) 'rackunit ns)

(parameterize ([current-namespace ns] [read-accept-reader #t] [read-accept-lang #t]
               [exit-handler (λ (status) (report "assertion" (list (cons "message" (message "the program exited before the test completed")))))])
  (define stx (with-handlers ([exn:fail:read? (λ (e) (report "compile_error" (list (cons "message" (message (exn-message e))))))])
                (read-syntax 'main (open-input-string source))))
  (with-handlers ([exn:fail:syntax? (λ (e) (report "compile_error" (list (cons "message" (message (exn-message e))))))])
    (eval (namespace-syntax-introduce stx)))
  (define name (let ([d (syntax->datum stx)]) (and (pair? d) (pair? (cdr d)) (cadr d))))
  (parameterize ([current-check-handler
                  (λ (e) (report "assertion" (list (cons "message" (message (if (and (exn? e) (non-empty-string? (exn-message e)))
                                                                                 (exn-message e) "a rackunit check failed"))))))])
    (with-handlers ([(λ (e) #t) (failed (if code "assertion" "runtime_error"))])
      (dynamic-require `',name #f)))
  (when code (report "completed"))
  (define fn (with-handlers ([(λ (e) #t) (failed "runtime_error")])
               (parameterize ([current-namespace (module->namespace `',name)])
                 (namespace-variable-value (string->symbol (hash-ref what 'fn))))))
  (define value (with-handlers ([(λ (e) #t) (failed "runtime_error")])
                  (apply fn (map plain (hash-ref what 'args '())))))
  (define encoded (with-handlers ([exn:fail? (failed "not_plain")]) (encode value)))
  (report "returned" (list (cons "value" encoded))))
