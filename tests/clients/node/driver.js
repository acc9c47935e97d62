// Drives kafka-node 5.0.0, a strict legacy client (it refuses magic 2), for Skiff's client tests.
// Usage: node driver.js produce|consume '<json args>'; prints one JSON line with the outcome.
'use strict';
const kafka = require('kafka-node');

const [command, rawArgs] = process.argv.slice(2);
const args = JSON.parse(rawArgs);
const TIMEOUT_MS = args.timeoutMs || 30000;

function finish(result, code = 0) {
  process.stdout.write(JSON.stringify(result) + '\n');
  process.exit(code);
}

setTimeout(() => finish({ error: 'timeout', command }, 1), TIMEOUT_MS).unref();

function client() {
  return new kafka.KafkaClient({ kafkaHost: args.bootstrap, requestTimeout: TIMEOUT_MS });
}

function produce() {
  const producer = new kafka.Producer(client(), { requireAcks: 1, partitionerType: 0 });
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

function consume() {
  const seen = [];
  const consumer = new kafka.Consumer(
    client(),
    [{ topic: args.topic, partition: args.partition || 0, offset: args.offset || 0 }],
    {
      autoCommit: false,
      fromOffset: true,
      encoding: 'utf8',
      keyEncoding: 'utf8',
      fetchMaxBytes: args.fetchMaxBytes || 1024 * 1024,
    },
  );
  consumer.on('message', (message) => {
    seen.push([message.offset, message.key, message.value]);
    if (seen.length >= args.count) {
      consumer.close(true, () => finish({ messages: seen }));
    }
  });
  consumer.on('error', (error) => finish({ error: String(error), messages: seen }, 1));
  consumer.on('offsetOutOfRange', (error) => finish({ error: 'offsetOutOfRange ' + String(error), messages: seen }, 1));
}

({ produce, consume }[command] || (() => finish({ error: 'unknown command ' + command }, 1)))();
