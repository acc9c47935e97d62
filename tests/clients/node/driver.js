// Drives kafka-node 5.0.0, a strict legacy client (it refuses magic 2), for Skiff's client tests.
// Usage: node driver.js produce|consume '<json args>'; prints one JSON line with the outcome.
'use strict';
const kafka = require('kafka-node');

const [command, rawArgs] = process.argv.slice(2);
const args = JSON.parse(rawArgs);
const TIMEOUT_MS = args.timeoutMs || 30000;

function finish(result, code = 0) {
  // Exit once the line is written: stdout to a pipe is asynchronous, and exiting at once cuts an
  // answer longer than the pipe's buffer (64 KiB).
  process.stdout.write(JSON.stringify(result) + '\n', () => process.exit(code));
}

setTimeout(() => finish({ error: 'timeout', command }, 1), TIMEOUT_MS).unref();

function client() {
  const options = { kafkaHost: args.bootstrap, requestTimeout: TIMEOUT_MS };
  // SASL/PLAIN: kafka-node sends bare tokens after a v0 SaslHandshake, as 0.10-era clients do.
  if (args.sasl) options.sasl = args.sasl;
  return new kafka.KafkaClient(options);
}

function produce() {
  // requireAcks -1 is acks=all (the cluster tests), 1 by default; ackTimeoutMs is the request's
  // timeout for those acknowledgements (kafka-node's default, 100 ms, is shorter than replication).
  const producer = new kafka.Producer(client(), {
    requireAcks: args.requireAcks || 1,
    ackTimeoutMs: args.ackTimeoutMs || 100,
    partitionerType: 0,
  });
  producer.on('error', (error) => finish({ error: String(error) }, 1));
  producer.on('ready', () => {
    const messages = args.messages.map(([key, value]) => new kafka.KeyedMessage(key, value));
    producer.send(
      [{ topic: args.topic, partition: args.partition || 0, messages, attributes: args.attributes || 0 }],
      (error, result) => {
        if (error) finish({ error: String(error) }, 1);
        finish({ result });
      },
    );
  });
}

// With `partitions` (a list) instead of `partition`, reads them all and prints each message as
// [partition, offset, key, value].
function consume() {
  const seen = [];
  const many = Array.isArray(args.partitions);
  const partitions = many ? args.partitions : [args.partition || 0];
  const consumer = new kafka.Consumer(
    client(),
    partitions.map((partition) => ({ topic: args.topic, partition, offset: args.offset || 0 })),
    {
      autoCommit: false,
      fromOffset: true,
      encoding: 'utf8',
      keyEncoding: 'utf8',
      fetchMaxBytes: args.fetchMaxBytes || 1024 * 1024,
    },
  );
  consumer.on('message', (message) => {
    seen.push(many ? [message.partition, message.offset, message.key, message.value]
      : [message.offset, message.key, message.value]);
    if (seen.length >= args.count) {
      consumer.close(true, () => finish({ messages: seen }));
    }
  });
  consumer.on('error', (error) => finish({ error: String(error), messages: seen }, 1));
  consumer.on('offsetOutOfRange', (error) => finish({ error: 'offsetOutOfRange ' + String(error), messages: seen }, 1));
}

({ produce, consume, 'group-consume': () => {} }[command] || (() => finish({ error: 'unknown command ' + command }, 1)))();

// --- appended: kafka-node ConsumerGroup (legacy group APIs v0) ---------------------------------
// Usage: node driver.js group-consume '{"bootstrap", "topic", "group", "count", "commit"}'.
// Consumes `count` messages as a member of `group`, commits them (if `commit`), leaves, and prints
// the messages with their partitions.
function groupConsume() {
  const seen = [];
  const consumer = new kafka.ConsumerGroup(
    {
      kafkaHost: args.bootstrap,
      groupId: args.group,
      sessionTimeout: args.sessionTimeout || 6000,
      heartbeatInterval: 1000,
      autoCommit: false,
      fromOffset: 'earliest',
      protocol: ['roundrobin'],
      encoding: 'utf8',
      keyEncoding: 'utf8',
      requestTimeout: TIMEOUT_MS,
    },
    [args.topic],
  );
  let done = false;
  consumer.on('message', (message) => {
    if (done) return;
    seen.push([message.partition, message.offset, message.key, message.value]);
    if (seen.length >= args.count) done = true;
  });
  // kafka-node moves its commit position after the whole fetch response was delivered ('done'),
  // not per message: commit then, so the committed offset is the next one to read.
  consumer.on('done', () => {
    if (!done || consumer.skiffLeaving) return;
    consumer.skiffLeaving = true;
    const leave = () => consumer.close(false, () => finish({ messages: seen }));
    if (args.commit) {
      consumer.commit(true, (error) => {
        if (error) finish({ error: 'commit ' + String(error), messages: seen }, 1);
        leave();
      });
    } else {
      leave();
    }
  });
  consumer.on('error', (error) => finish({ error: String(error), messages: seen }, 1));
  consumer.on('offsetOutOfRange', (error) => finish({ error: 'offsetOutOfRange ' + String(error), messages: seen }, 1));
}

if (command === 'group-consume') groupConsume();
