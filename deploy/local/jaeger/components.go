// The components of the local stack's Jaeger: what ops/stack/services/jaeger.py configures (OTLP over HTTP in, a
// batch, Jaeger's storage exporter into its in-memory storage, Jaeger's query service) and the collector's cheap core
// pieces an operator may add while diagnosing (the debug exporter, the memory limiter). It replaces
// cmd/jaeger/internal/components.go of Jaeger v1.76.0 in the build (deploy/local/fetch/jaeger.sh), the way the
// OpenTelemetry Collector Builder makes a distribution: Jaeger's full list adds Kafka, Zipkin, Prometheus, AWS SigV4,
// tail sampling and OTTL filters, about a third of the first build's CPU time, none of which the stack uses.
// Jaeger's own tests (components_test.go) expect the full list: they are not part of this build.

// Copyright (c) 2023 The Jaeger Authors.
// SPDX-License-Identifier: Apache-2.0

package internal

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/debugexporter"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/batchprocessor"
	"go.opentelemetry.io/collector/processor/memorylimiterprocessor"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"

	"github.com/jaegertracing/jaeger/cmd/jaeger/internal/exporters/storageexporter"
	"github.com/jaegertracing/jaeger/cmd/jaeger/internal/extension/jaegerquery"
	"github.com/jaegertracing/jaeger/cmd/jaeger/internal/extension/jaegerstorage"
)

type builders struct {
	extension func(factories ...extension.Factory) (map[component.Type]extension.Factory, error)
	receiver  func(factories ...receiver.Factory) (map[component.Type]receiver.Factory, error)
	exporter  func(factories ...exporter.Factory) (map[component.Type]exporter.Factory, error)
	processor func(factories ...processor.Factory) (map[component.Type]processor.Factory, error)
	connector func(factories ...connector.Factory) (map[component.Type]connector.Factory, error)
}

func defaultBuilders() builders {
	return builders{
		extension: otelcol.MakeFactoryMap[extension.Factory],
		receiver:  otelcol.MakeFactoryMap[receiver.Factory],
		exporter:  otelcol.MakeFactoryMap[exporter.Factory],
		processor: otelcol.MakeFactoryMap[processor.Factory],
		connector: otelcol.MakeFactoryMap[connector.Factory],
	}
}

func (b builders) build() (otelcol.Factories, error) {
	var err error
	factories := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
	if factories.Extensions, err = b.extension(jaegerquery.NewFactory(), jaegerstorage.NewFactory()); err != nil {
		return otelcol.Factories{}, err
	}
	if factories.Receivers, err = b.receiver(otlpreceiver.NewFactory()); err != nil {
		return otelcol.Factories{}, err
	}
	if factories.Exporters, err = b.exporter(storageexporter.NewFactory(), debugexporter.NewFactory()); err != nil {
		return otelcol.Factories{}, err
	}
	if factories.Processors, err = b.processor(batchprocessor.NewFactory(), memorylimiterprocessor.NewFactory()); err != nil {
		return otelcol.Factories{}, err
	}
	if factories.Connectors, err = b.connector(); err != nil {
		return otelcol.Factories{}, err
	}
	return factories, nil
}

func Components() (otelcol.Factories, error) {
	return defaultBuilders().build()
}
