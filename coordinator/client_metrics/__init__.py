"""Client metrics (KIP-714): subscriptions (`configs`) and the client instances that fetch them and push
their metrics (`manager`), as Kafka's ClientMetricsConfigs and ClientMetricsManager."""
