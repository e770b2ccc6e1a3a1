# grpo-code's Perl harness (docs/languages.md): loads the program from the file named by
# $ARGV[0], then runs one script test or calls one sub with the test's arguments (list
# context: one value is itself, more are an array) and reports the result as data on fd 3.
# The payload on fd 4: the nonce, then one JSON object. The expected value never enters
# this process.
package GrpoHarness;
use strict;
use warnings;
use JSON::PP ();
use POSIX ();
use B ();

my $json = JSON::PP->new->allow_nonref->utf8;
open(my $payload, '<&=', 4) or POSIX::_exit(70);
my $text = do { local $/; <$payload> } // '';
close $payload;
my ($nonce, $rest) = split /\n/, $text, 2;
my $what = $json->decode($rest // '{}');
open(my $out, '>&=', 3) or POSIX::_exit(70);
binmode $out;

sub report {
    my ($event, %extra) = @_;
    my $line = '{"nonce":' . $json->encode($nonce) . ', "event": ' . $json->encode($event);
    $line .= ', ' . $json->encode($_) . ': ' . $extra{$_} for sort keys %extra;
    syswrite $out, $line . "}\n";
    POSIX::_exit(0);
}

sub message { my $t = substr(shift // '', 0, 4000); return JSON::PP->new->allow_nonref->encode($t) }

sub plain {
    my $v = shift;
    return [map { plain($_) } @$v] if ref $v eq 'ARRAY';
    if (ref $v eq 'HASH') {
        my @k = keys %$v;
        if (@k == 1 && $k[0] =~ /^\$[tsf]$/) { return [map { plain($_) } @{$v->{$k[0]}}] }
        if (@k == 1 && $k[0] eq '$d') { return {map { (plain($_->[0]) => plain($_->[1])) } @{$v->{'$d'}}} }
        return {map { ($_ => plain($v->{$_})) } @k};
    }
    return $v;
}

sub encode {
    my $v = shift;
    return 'null' unless defined $v;
    if (ref $v eq 'ARRAY') { return '[' . join(', ', map { encode($_) } @$v) . ']' }
    if (ref $v eq 'HASH') { return '{' . join(', ', map { $json->encode("$_") . ': ' . encode($v->{$_}) } sort keys %$v) . '}' }
    if (JSON::PP::is_bool($v)) { return $v ? 'true' : 'false' }
    die "the sub returned a " . ref($v) . ", which is not plain data\n" if ref $v;
    my $flags = B::svref_2object(\$v)->FLAGS;
    if ($flags & (B::SVp_IOK | B::SVp_NOK) && !($flags & B::SVp_POK)) {
        return 'NaN' if $v != $v;
        return $v > 0 ? 'Infinity' : '-Infinity' if $v * 0 != 0;
        return $json->encode($v);
    }
    return $json->encode("$v");
}

my $source = do { open(my $f, '<:raw', $ARGV[0]) or POSIX::_exit(70); local $/; <$f> };
package main;
no strict;
eval "#line 1 main.pl\n" . $source;
GrpoHarness::report('runtime_error', message => GrpoHarness::message("$@")) if $@;
if (exists $what->{code}) {
    eval "#line 1 test.pl\n" . $what->{code};
    GrpoHarness::report('assertion', message => GrpoHarness::message("$@")) if $@;
    GrpoHarness::report('completed');
}
my @result = eval { my $fn = \&{"main::" . $what->{fn}}; $fn->(@{GrpoHarness::plain($what->{args} // [])}) };
GrpoHarness::report('runtime_error', message => GrpoHarness::message("$@")) if $@;
my $value = eval { GrpoHarness::encode(@result == 1 ? $result[0] : \@result) };
GrpoHarness::report('not_plain', message => GrpoHarness::message("$@")) if $@;
GrpoHarness::report('returned', value => $value);
