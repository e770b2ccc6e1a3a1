# grpo-code's Ruby harness (docs/languages.md): loads the program from the file named by
# ARGV[0], then runs one script test (test/unit cases run here, not at exit) or calls one
# method with the test's arguments and reports the result as data on fd 3. The payload on
# fd 4: the nonce, then one JSON object. The expected value never enters this process.
require 'json'
require 'set'

module GrpoHarness
  payload = IO.new(4, 'rb')
  text = payload.read.to_s.force_encoding('UTF-8')
  payload.close
  NONCE, rest = text.split("\n", 2)
  WHAT = JSON.parse(rest || '{}')
  REPORT = IO.new(3, 'wb')
  REPORT.sync = true
  WRITE = IO.instance_method(:write)
  EXIT = Kernel.method(:exit!)

  def self.report(event, extra = {})
    line = '{"nonce":' + JSON.generate(NONCE.to_s) + ', "event": ' + JSON.generate(event)
    extra.each { |k, v| line += ', ' + JSON.generate(k) + ': ' + v }
    WRITE.bind(REPORT).call(line + "}\n")
    EXIT.call(0)
  end

  def self.message(text)
    JSON.generate(text.to_s.encode('UTF-8', invalid: :replace, undef: :replace)[0, 4000])
  end

  def self.plain(v)
    return v.map { |x| plain(x) } if v.is_a?(Array)
    if v.is_a?(Hash)
      if v.size == 1 && %w[$t $s $f].include?(v.keys[0])
        items = plain(v.values[0])
        return v.keys[0] == '$t' ? items : Set.new(items)
      end
      return v.values[0].map { |k, x| [plain(k), plain(x)] }.to_h if v.size == 1 && v.keys[0] == '$d'
      return Integer(v.values[0], 16) if v.size == 1 && v.keys[0] == '$i' && v.values[0].is_a?(String)
      return v.transform_values { |x| plain(x) }
    end
    v
  end

  def self.encode(v)
    case v
    when nil then 'null'
    when true then 'true'
    when false then 'false'
    when Integer then v.to_s
    when Float then v.nan? ? 'NaN' : v.infinite? ? (v > 0 ? 'Infinity' : '-Infinity') : v.to_s
    when String, Symbol then JSON.generate(v.to_s)
    when Array then '[' + v.map { |x| encode(x) }.join(', ') + ']'
    when Set then '{"$s": [' + v.map { |x| encode(x) }.join(', ') + ']}'
    when Hash
      if v.keys.all? { |k| k.is_a?(String) || k.is_a?(Symbol) }
        '{' + v.map { |k, x| JSON.generate(k.to_s) + ': ' + encode(x) }.join(', ') + '}'
      else
        '{"$d": [' + v.map { |k, x| '[' + encode(k) + ', ' + encode(x) + ']' }.join(', ') + ']}'
      end
    else
      raise TypeError, "the method returned a #{v.class}, which is not plain data"
    end
  end

  def self.failed(error)
    return report('memory') if error.is_a?(NoMemoryError)
    name = error.class.name.to_s
    event = name =~ /Assertion|Test::Unit|Minitest/ ? 'assertion' : 'runtime_error'
    report(event, 'message' => message("#{name}: #{error.message}\n" + Array(error.backtrace).first(8).join("\n")))
  end
end

begin
  program = File.read(ARGV[0], encoding: 'UTF-8')
  begin
    RubyVM::InstructionSequence.compile(program)
  rescue SyntaxError => e
    GrpoHarness.report('compile_error', 'message' => GrpoHarness.message(e.message))
  end
  TOPLEVEL_BINDING.eval(program, 'main.rb')
  if GrpoHarness::WHAT.key?('code')
    TOPLEVEL_BINDING.eval(GrpoHarness::WHAT['code'], 'test.rb')
    if defined?(Test::Unit::AutoRunner)
      Test::Unit::AutoRunner.need_auto_run = false
      passed = Test::Unit::AutoRunner.run
      GrpoHarness.report('assertion', 'message' => GrpoHarness.message('a test/unit test failed')) unless passed
    end
    GrpoHarness.report('completed')
  else
    args = GrpoHarness.plain(GrpoHarness::WHAT['args'] || [])
    value = Object.send(GrpoHarness::WHAT['fn'].to_sym, *args)
    begin
      encoded = GrpoHarness.encode(value)
    rescue TypeError => e
      GrpoHarness.report('not_plain', 'message' => GrpoHarness.message(e.message))
    end
    GrpoHarness.report('returned', 'value' => encoded)
  end
rescue SystemExit => e
  GrpoHarness.report('assertion', 'message' => GrpoHarness.message("the program exited (status #{e.status}) before the test completed"))
rescue Exception => e
  GrpoHarness.failed(e)
end
