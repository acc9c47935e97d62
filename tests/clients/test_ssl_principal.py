"""SSL client principals as Apache Kafka makes them, checked against Java at test time (issue 14
item 6): client certificates with awkward subjects (a comma inside a value, multi-valued RDNs, an
OID without a keyword, escapes, non-ASCII text in UTF8String, T61String and BMPString) are made
with openssl, then the JDK names each subject (X500Principal.getName(), what Kafka's default
principal builder maps) and Kafka's own SslPrincipalMapper (kafka-clients) maps it under several
ssl.principal.mapping.rules values; `skiff ssl-principal` must give the same name and user for
every one, and refuse the rules Kafka refuses. Needs javac and the kafka-clients classpath
(scripts/install-clients.sh); without them this fails."""

import json
import subprocess

import pytest

from conftest import BROKER_BIN
from java_programs import classpath, run_java

# -subj values (openssl's syntax: `/` between RDNs, `+` inside a multi-valued one, `\` escapes),
# each with the string mask the certificate is made with (utf8only: UTF8String everywhere
# but C; default: PrintableString, T61String or BMPString by content).
SUBJECTS = [
    ("/O=b/CN=a", "utf8only"),
    ("/CN=a,O=b", "utf8only"),
    ("/O=Example+OU=eng/CN=alice", "utf8only"),
    ("/CN=x+testAttr=y", "utf8only"),
    ("/emailAddress=a@b.c/CN=mail", "utf8only"),
    ("/CN= lead and trail ", "utf8only"),
    ('/CN=a;b<c>d"e\\\\f=g\\+h', "utf8only"),
    ("/CN=#lead", "utf8only"),
    ("/O=Ünïcødé/CN=é ü", "utf8only"),
    ("/CN=aéü", "default"),
    ("/CN=Ωmega", "default"),
    ("/DC=com/DC=example/UID=u1/CN=bob", "utf8only"),
    ("/C=US/ST=s/L=l/street=main/serialNumber=123/title=boss/CN=z", "utf8only"),
    ("/CN=Duke/OU=ServiceUsers/O=Org/C=US", "utf8only"),
]

# Names mapped as they are (Kafka's own SslPrincipalMapperTest names among them).
NAMES = [
    "CN=Duke,OU=ServiceUsers,O=Org,C=US",
    "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US",
    "cn=duke,ou=sme,dc=mycp,dc=com",
    "cN=duke,OU=JavaSoft,O=Sun Microsystems",
    "OU=JavaSoft,O=Sun Microsystems,C=US",
    "bbb",
    "",
]

RULES = [
    "DEFAULT",
    "",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
    "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U,"
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,"
    "DEFAULT",
    "  RULE:^CN=([^,]*)(,.*)?$/$1/L  ,  DEFAULT  ",
    "RULE:^CN=(?<user>[a-z]+),.*$/${user}@x/, RULE:^O=(.*)$/$1/",
    "RULE:^CN=(.*?),.*$/$1$2$9$12/",
    "RULE:(.*)CN=(.*)/$2 $1/U",
    "RULE:.*/x/",
    "RULE:b*/-/",
    "RULE:^CN=(.*)$/\\$1 \\/ $1/, DEFAULT",
    "RULE:^(.*)$/$0$1$01/",
    # Refused by both.
    "DEFAULTX",
    "RULE:(a/b/",
    "RULE:abc",
    "RULE:^CN=(.*?)/$1/Lx, DEFAULT",
]

OPENSSL_CONFIG = """\
oid_section = new_oids
[new_oids]
testAttr = 1.2.3.4
[req]
distinguished_name = dn
string_mask = {mask}
[dn]
"""


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ssl-principal")
    paths = []
    for index, (subject, mask) in enumerate(SUBJECTS):
        config = folder / f"openssl-{index}.cnf"
        config.write_text(OPENSSL_CONFIG.format(mask=mask))
        cert = folder / f"cert-{index}.pem"
        subprocess.run(
            ["openssl", "req", "-config", str(config), "-x509", "-newkey", "ec", "-pkeyopt",
             "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(folder / f"key-{index}.pem"),
             "-out", str(cert), "-days", "1", "-subj", subject, "-multivalue-rdn", "-utf8"],
            check=True, capture_output=True, timeout=60,
        )
        paths.append(str(cert))
    return paths


def kafka_names(java_classes, rules, certificates):
    """[(subject, user or NO_MATCH/INVALID_RULES/FAILED)] from Kafka's classes, certificates first."""
    lines = [f"{rules}\tCERT\t{path}" for path in certificates] + [f"{rules}\tNAME\t{name}" for name in NAMES]
    code, stdout, stderr = run_java(java_classes, classpath(), "skiff.SslPrincipalNames",
                                    stdin="".join(line + "\n" for line in lines))
    assert code == 0, stderr[-4000:]
    answers = []
    for line in stdout.split("\n"):
        if not line:
            continue
        subject, user = line.split("\t")
        decode = lambda text: bytes.fromhex(text).decode("utf-8")
        answers.append((decode(subject), user if user in ("NO_MATCH", "INVALID_RULES", "FAILED") else decode(user)))
    assert len(answers) == len(lines), stdout
    return answers


def skiff_names(rules, certificates):
    """[(subject, user or NO_MATCH)] from `skiff ssl-principal`, or INVALID_RULES with the error."""
    args = [BROKER_BIN, "ssl-principal", "--rules", rules, *certificates]
    for name in NAMES:
        args.append(f"--name={name}")
    result = subprocess.run(args, capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        assert "ssl.principal.mapping.rules" in result.stderr, result.stderr
        return "INVALID_RULES", result.stderr
    answers = []
    for line in result.stdout.splitlines():
        answer = json.loads(line)
        principal = answer["principal"]
        answers.append((answer["subject"], "NO_MATCH" if principal is None else principal.removeprefix("User:")))
    return answers, ""


@pytest.mark.parametrize("rules", RULES)
def test_principals_are_kafkas(java_classes, certificates, rules):
    kafka = kafka_names(java_classes, rules, certificates)
    skiff, error = skiff_names(rules, certificates)
    if skiff == "INVALID_RULES":
        # Kafka refuses the rules too, or (a replacement naming a group that does not exist)
        # accepts them and fails each connection the rule applies to; Skiff refuses at start.
        users = {user for _, user in kafka}
        assert users <= {"INVALID_RULES", "FAILED", "NO_MATCH"}, (error, kafka)
        assert users & {"INVALID_RULES", "FAILED"}, (error, kafka)
        return
    assert all(user != "INVALID_RULES" for _, user in kafka), (rules, kafka)
    for (java_subject, java_user), (subject, user), source in zip(kafka, skiff, certificates + NAMES):
        assert subject == java_subject, f"{source}: the JDK names it {java_subject!r}, Skiff {subject!r}"
        assert user == java_user, f"{source} ({subject!r}) under {rules!r}: Kafka {java_user!r}, Skiff {user!r}"


def test_the_subjects_cover_every_string_type_and_shape(java_classes, certificates):
    """The vectors reach what they are meant to: hex for the unknown OID and non-keyword types,
    `+` inside a multi-valued RDN, escapes, and non-ASCII text from T61String and BMPString."""
    subjects = [subject for subject, _ in kafka_names(java_classes, "DEFAULT", certificates)]
    joined = "\n".join(subjects)
    for expected in ["1.2.3.4=#", "+", "CN=a\\,O\\=b", "CN=\\#lead", "CN=é ü", "CN=a\ufffd\ufffd", "CN=\x03\ufffd\\00m",
                     "2.5.4.12=#", "DC=com"]:
        assert expected in joined, f"{expected!r} not in\n{joined}"
