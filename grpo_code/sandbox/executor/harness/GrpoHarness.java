// grpo-code's Java harness (docs/languages.md): reads the payload on fd 4 (the nonce, then
// one JSON object), runs one script test's main or calls one function with arguments
// decoded into its own parameter types, and reports on fd 3. The expected value of a call
// never enters this process.
package grpo;

import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.lang.reflect.*;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.*;

public final class GrpoHarness {
    private static String nonce = "";

    public static void main(String[] argv) throws Exception {
        String text;
        try (FileInputStream in = new FileInputStream("/proc/self/fd/4")) {
            text = new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
        // Emptied before any program code runs: what opens fd 4 later finds no nonce.
        try (java.io.RandomAccessFile payload = new java.io.RandomAccessFile("/proc/self/fd/4", "rw")) {
            payload.setLength(0);
        }
        int cut = text.indexOf('\n');
        nonce = cut < 0 ? text : text.substring(0, cut);
        @SuppressWarnings("unchecked")
        Map<String, Object> what = (Map<String, Object>) new Parser(cut < 0 ? "{}" : text.substring(cut + 1)).value();
        try {
            if (what.containsKey("main")) {
                Method main = Class.forName((String) what.get("main")).getDeclaredMethod("main", String[].class);
                main.setAccessible(true);
                main.invoke(null, (Object) new String[0]);
                report("completed", "");
            } else {
                call((String) what.get("fn"), (List<?>) what.get("args"), (List<?>) what.get("classes"));
            }
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            if (cause instanceof AssertionError) {
                report("assertion", message(String.valueOf(cause)));
            } else if (cause instanceof OutOfMemoryError) {
                report("memory", "");
            } else {
                report("runtime_error", message(trace(cause)));
            }
        } catch (StackOverflowError e) {
            report("runtime_error", message("StackOverflowError"));
        }
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }

    static String trace(Throwable t) {
        java.io.StringWriter out = new java.io.StringWriter();
        t.printStackTrace(new java.io.PrintWriter(out));
        String s = out.toString();
        return s.length() > 4000 ? s.substring(0, 4000) : s;
    }

    static void call(String name, List<?> args, List<?> classes) throws Exception {
        for (Object className : classes) {
            Class<?> owner = Class.forName((String) className);
            for (Method m : owner.getDeclaredMethods()) {
                if (!m.getName().equals(name) || m.getParameterCount() != args.size()) continue;
                Type[] types = m.getGenericParameterTypes();
                Object[] values = new Object[types.length];
                for (int i = 0; i < types.length; i++) {
                    try {
                        values[i] = decode(args.get(i), types[i]);
                    } catch (RuntimeException e) {
                        report("runtime_error", message("argument " + (i + 1) + " of " + name + ": " + e.getMessage()));
                        return;
                    }
                }
                m.setAccessible(true);
                Object self = null;
                if (!Modifier.isStatic(m.getModifiers())) {
                    Constructor<?> make = owner.getDeclaredConstructor();
                    make.setAccessible(true);
                    self = make.newInstance();
                }
                Object result = m.invoke(self, values);
                StringBuilder out = new StringBuilder();
                try {
                    encode(m.getReturnType() == void.class ? null : result, out);
                } catch (IllegalArgumentException e) {
                    report("not_plain", message(e.getMessage()));
                    return;
                }
                report("returned", ", \"value\": " + out);
                return;
            }
        }
        report("runtime_error", message("no method " + name + " taking " + args.size() + " arguments"));
    }

    static void report(String event, String extra) throws Exception {
        StringBuilder line = new StringBuilder("{\"nonce\":");
        quote(nonce, line);
        line.append(", \"event\": \"").append(event).append('"').append(extra).append("}\n");
        try (FileOutputStream out = new FileOutputStream("/proc/self/fd/3")) {
            out.write(line.toString().getBytes(StandardCharsets.UTF_8));
        }
    }

    static String message(String text) {
        StringBuilder out = new StringBuilder(", \"message\": ");
        quote(text, out);
        return out.toString();
    }

    // ---------------------------------------------------------------- values

    /** The sandbox's tagged containers ({"$t": [...]}, {"$s": [...]}, {"$d": [[k, v]...]}) as their items. */
    static List<?> items(Object v) {
        if (v instanceof List) return (List<?>) v;
        if (v instanceof Map && ((Map<?, ?>) v).size() == 1) {
            for (String tag : new String[] {"$t", "$s", "$f", "$d"}) {
                Object body = ((Map<?, ?>) v).get(tag);
                if (body instanceof List) return (List<?>) body;
            }
        }
        throw new IllegalArgumentException("expected a sequence");
    }

    static Object decode(Object v, Type type) {
        Class<?> raw = type instanceof ParameterizedType ? (Class<?>) ((ParameterizedType) type).getRawType()
                : type instanceof Class ? (Class<?>) type : Object.class;
        Type[] params = type instanceof ParameterizedType ? ((ParameterizedType) type).getActualTypeArguments() : new Type[0];
        if (v == null) {
            if (raw == Optional.class) return Optional.empty();
            if (raw.isPrimitive()) throw new IllegalArgumentException("null for a " + raw);
            return null;
        }
        if (raw == int.class || raw == Integer.class) return number(v).intValueExact();
        if (raw == long.class || raw == Long.class) return number(v).longValueExact();
        if (raw == short.class || raw == Short.class) return number(v).shortValueExact();
        if (raw == byte.class || raw == Byte.class) return number(v).byteValueExact();
        if (raw == BigInteger.class) return number(v);
        if (raw == double.class || raw == Double.class) return real(v);
        if (raw == float.class || raw == Float.class) return (float) real(v);
        if (raw == boolean.class || raw == Boolean.class) {
            if (v instanceof Boolean) return v;
            throw new IllegalArgumentException("expected a bool");
        }
        if (raw == String.class || raw == CharSequence.class) {
            if (v instanceof String) return v;
            throw new IllegalArgumentException("expected a string");
        }
        if (raw == char.class || raw == Character.class) {
            if (v instanceof String && ((String) v).length() == 1) return ((String) v).charAt(0);
            throw new IllegalArgumentException("expected one character");
        }
        if (raw == Optional.class) return Optional.ofNullable(decode(v, params.length > 0 ? params[0] : Object.class));
        if (raw.isArray()) {
            List<?> list = items(v);
            Object array = Array.newInstance(raw.getComponentType(), list.size());
            for (int i = 0; i < list.size(); i++) Array.set(array, i, decode(list.get(i), raw.getComponentType()));
            return array;
        }
        if (Map.class.isAssignableFrom(raw)) {
            Map<Object, Object> out = raw.isAssignableFrom(HashMap.class) ? new HashMap<>() : new TreeMap<>();
            Type kt = params.length > 0 ? params[0] : Object.class, vt = params.length > 1 ? params[1] : Object.class;
            if (v instanceof Map && !((Map<?, ?>) v).containsKey("$d")) {
                for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) out.put(key(e.getKey(), kt), decode(e.getValue(), vt));
            } else {
                for (Object pair : items(v)) {
                    List<?> kv = items(pair);
                    out.put(decode(kv.get(0), kt), decode(kv.get(1), vt));
                }
            }
            return out;
        }
        if (Collection.class.isAssignableFrom(raw) || raw == Iterable.class) {
            Collection<Object> out = Set.class.isAssignableFrom(raw)
                    ? (raw.isAssignableFrom(HashSet.class) ? new HashSet<>() : new TreeSet<>())
                    : (raw.isAssignableFrom(ArrayList.class) ? new ArrayList<>() : new LinkedList<>());
            Type it = params.length > 0 ? params[0] : Object.class;
            for (Object item : items(v)) out.add(decode(item, it));
            return out;
        }
        if (raw == Object.class) return v instanceof BigInteger && ((BigInteger) v).bitLength() < 32 ? ((BigInteger) v).intValue() : v;
        throw new IllegalArgumentException("cannot pass a value as " + type.getTypeName());
    }

    static Object key(Object k, Type type) {
        if (type == String.class || type == Object.class) return k;
        return decode(new Parser((String) k).value(), type);  // a JSON key is text: 1 arrives as "1"
    }

    static BigInteger number(Object v) {
        if (v instanceof BigInteger) return (BigInteger) v;
        if (v instanceof Double && (Double) v == Math.rint((Double) v)) return java.math.BigDecimal.valueOf((Double) v).toBigInteger();
        throw new IllegalArgumentException("expected an integer");
    }

    static double real(Object v) {
        if (v instanceof BigInteger) return ((BigInteger) v).doubleValue();
        if (v instanceof Double) return (Double) v;
        throw new IllegalArgumentException("expected a number");
    }

    static void encode(Object v, StringBuilder out) {
        if (v == null) {
            out.append("null");
        } else if (v instanceof Boolean || v instanceof Integer || v instanceof Long || v instanceof Short
                || v instanceof Byte || v instanceof BigInteger) {
            out.append(v);
        } else if (v instanceof Double || v instanceof Float) {
            double d = ((Number) v).doubleValue();
            out.append(Double.isNaN(d) ? "NaN" : Double.isInfinite(d) ? (d > 0 ? "Infinity" : "-Infinity") : v.toString());
        } else if (v instanceof String || v instanceof Character) {
            quote(v.toString(), out);
        } else if (v instanceof Optional) {
            encode(((Optional<?>) v).orElse(null), out);
        } else if (v.getClass().isArray()) {
            out.append('[');
            for (int i = 0; i < Array.getLength(v); i++) {
                if (i > 0) out.append(", ");
                encode(Array.get(v, i), out);
            }
            out.append(']');
        } else if (v instanceof Set) {
            out.append("{\"$s\": ");
            encode(((Set<?>) v).toArray(), out);
            out.append('}');
        } else if (v instanceof Collection) {
            encode(((Collection<?>) v).toArray(), out);
        } else if (v instanceof Map) {
            Map<?, ?> map = (Map<?, ?>) v;
            boolean text = map.keySet().stream().allMatch(k -> k instanceof String || k instanceof Character);
            out.append(text ? "{" : "{\"$d\": [");
            boolean first = true;
            for (Map.Entry<?, ?> e : map.entrySet()) {
                if (!first) out.append(", ");
                first = false;
                if (!text) out.append('[');
                encode(e.getKey(), out);
                out.append(text ? ": " : ", ");
                encode(e.getValue(), out);
                if (!text) out.append(']');
            }
            out.append(text ? "}" : "]}");
        } else {
            throw new IllegalArgumentException("the function returned a " + v.getClass().getName() + ", which is not plain data");
        }
    }

    static void quote(String s, StringBuilder out) {
        out.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') out.append('\\').append(c);
            else if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
            else out.append(c);
        }
        out.append('"');
    }

    /** JSON with NaN and Infinity; integers as BigInteger, other numbers as Double. */
    static final class Parser {
        private final String s;
        private int i;

        Parser(String s) { this.s = s; }

        private void ws() { while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++; }

        Object value() {
            ws();
            if (i >= s.length()) throw new IllegalArgumentException("unexpected end of JSON");
            char c = s.charAt(i);
            if (c == '{') {
                i++;
                Map<String, Object> out = new LinkedHashMap<>();
                ws();
                if (s.charAt(i) == '}') { i++; return out; }
                while (true) {
                    ws();
                    String k = string();
                    ws();
                    i++;  // ':'
                    out.put(k, value());
                    ws();
                    if (s.charAt(i++) == '}') return out;
                }
            }
            if (c == '[') {
                i++;
                List<Object> out = new ArrayList<>();
                ws();
                if (s.charAt(i) == ']') { i++; return out; }
                while (true) {
                    out.add(value());
                    ws();
                    if (s.charAt(i++) == ']') return out;
                }
            }
            if (c == '"') return string();
            if (s.startsWith("null", i)) { i += 4; return null; }
            if (s.startsWith("true", i)) { i += 4; return true; }
            if (s.startsWith("false", i)) { i += 5; return false; }
            int start = i;
            while (i < s.length() && "+-0123456789.eEINaInfinity".indexOf(s.charAt(i)) >= 0) i++;
            String t = s.substring(start, i);
            if (t.equals("NaN")) return Double.NaN;
            if (t.equals("Infinity")) return Double.POSITIVE_INFINITY;
            if (t.equals("-Infinity")) return Double.NEGATIVE_INFINITY;
            if (t.matches("-?\\d+")) return new BigInteger(t);
            return Double.parseDouble(t);
        }

        String string() {
            StringBuilder out = new StringBuilder();
            i++;
            while (true) {
                char c = s.charAt(i++);
                if (c == '"') return out.toString();
                if (c != '\\') { out.append(c); continue; }
                char e = s.charAt(i++);
                switch (e) {
                    case 'n': out.append('\n'); break;
                    case 't': out.append('\t'); break;
                    case 'r': out.append('\r'); break;
                    case 'b': out.append('\b'); break;
                    case 'f': out.append('\f'); break;
                    case 'u': out.append((char) Integer.parseInt(s.substring(i, i + 4), 16)); i += 4; break;
                    default: out.append(e);
                }
            }
        }
    }
}
