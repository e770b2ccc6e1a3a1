# grpo-code's R harness (docs/languages.md): sources the program from the file named by the
# first argument, then runs one script test or calls one function with the test's arguments
# (JSON arrays as vectors where they are uniform, as MultiPL-E's prompts take them) and
# reports the result as data on fd 3. The payload on fd 4: the nonce, then one JSON object.
# The expected value never enters this process.
local({
  con <- file("/proc/self/fd/4", "rb")
  text <- rawToChar(readBin(con, "raw", 256 * 1024 * 1024))
  close(con)
  close(file("/proc/self/fd/4", "wb"))  # emptied before any program code runs: no nonce to find later
  cut <- regexpr("\n", text, fixed = TRUE)
  nonce <- if (cut < 0) text else substr(text, 1, cut - 1)
  what <- jsonlite::fromJSON(if (cut < 0) "{}" else substr(text, cut + 1, nchar(text)), simplifyVector = FALSE)
  out <- file("/proc/self/fd/3", "wb")
  quote <- function(s) as.character(jsonlite::toJSON(s, auto_unbox = TRUE))
  report <- function(event, extra = list()) {
    line <- paste0('{"nonce":', quote(nonce), ', "event": ', quote(event))
    for (k in names(extra)) line <- paste0(line, ", ", quote(k), ": ", extra[[k]])
    writeBin(charToRaw(paste0(line, "}\n")), out)
    flush(out)
    quit(save = "no", status = 0, runLast = FALSE)
  }
  message <- function(e) quote(substr(conditionMessage(e), 1, 4000))
  failed <- function(event) function(e) {
    if (grepl("cannot allocate", conditionMessage(e))) report("memory")
    report(event, list(message = message(e)))
  }
  # a JSON array of scalars is a vector (c(1, 2, 3), as MultiPL-E's prompts take them), other
  # arrays lists; the sandbox's tuple and set tags are arrays, a dict's pairs a named list
  untag <- function(v) {
    if (!is.list(v)) return(v)
    if (length(v) == 1 && !is.null(names(v)) && names(v) %in% c("$t", "$s", "$f")) return(untag(v[[1]]))
    if (length(v) == 1 && identical(names(v), "$d")) {
      out <- lapply(v[[1]], function(kv) untag(kv[[2]]))
      names(out) <- vapply(v[[1]], function(kv) as.character(kv[[1]]), "")
      return(out)
    }
    items <- lapply(v, untag)
    if (is.null(names(v)) && length(items) > 0 &&
        all(vapply(items, function(x) is.atomic(x) && length(x) == 1, TRUE))) return(unlist(items))
    if (is.null(names(v)) && length(items) == 0) return(c())
    items
  }
  args <- NULL
  source_ok <- tryCatch({ sys.source(commandArgs(TRUE)[1], envir = globalenv()); TRUE },
                        error = failed("runtime_error"))
  if (!is.null(what$code)) {
    tryCatch(eval(parse(text = what$code, keep.source = FALSE), envir = globalenv()), error = failed("assertion"))
    report("completed")
  }
  fn <- get(what$fn, envir = globalenv(), mode = "function")
  args <- lapply(what$args, untag)
  value <- tryCatch(do.call(fn, args), error = failed("runtime_error"))
  encoded <- tryCatch(as.character(jsonlite::toJSON(value, auto_unbox = TRUE, digits = NA, null = "null", na = "null")),
                      error = failed("not_plain"))
  report("returned", list(value = encoded))
})
