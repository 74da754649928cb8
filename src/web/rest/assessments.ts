import { Type } from 'typebox';
import { formatTimestamp } from '../../core/index.js';
import type { AssessmentView, Assessments, ScanReport } from '../../ra/scans/assessments.js';
import type { App } from '../types.js';
import { principalOf } from '../types.js';
import { okBody, bearer, responses } from './schemas.js';

const read = { access: { area: 'orders', write: false } } as const;
const write = { access: { area: 'orders', write: true } } as const;
const IdParams = Type.Object({ ServiceOrderID: Type.String({ pattern: '^[0-9]{1,10}$' }) });

/**
 * POST /VulnerabilityAssessment, GET /VulnerabilityAssessmentRescan/{id} (spec §4.22–4.23; the
 * misspelt paths of the original clients reach them, web/compat.ts) and, an extension,
 * GET /VulnerabilityAssessment/{id}: the settings, the latest report and the history.
 */
export function registerAssessments(app: App, deps: { assessments: Assessments }): void {
  app.post(
    '/VulnerabilityAssessment',
    {
      schema: {
        tags: ['scans'],
        summary: 'Switch the weekly vulnerability assessment of an order on or off',
        security: bearer,
        description:
          'Spec 4.22. Products with feature WVS only. The first scan of an Active assessment runs at once, then weekly; reports by mail per EmailNotificationLevel.',
        body: Type.Object(
          {
            ServiceOrderID: Type.Optional(Type.Union([Type.Integer(), Type.String({ maxLength: 20 })])),
            ServiceStatus: Type.Optional(Type.String({ maxLength: 20, description: 'Active or Inactive' })),
            EmailNotificationLevel: Type.Optional(
              Type.String({ maxLength: 20, description: 'NONE, NEW_REPORT or CRITICAL' }),
            ),
          },
          { additionalProperties: true },
        ),
        response: responses(okBody({ Message: Type.String() })),
      },
      config: write,
    },
    async (request) => ({
      success: true as const,
      Message: await deps.assessments.configure(
        { principal: principalOf(request), clientAddress: request.ip },
        request.body,
      ),
    }),
  );

  app.get<{ Params: { ServiceOrderID: string } }>(
    '/VulnerabilityAssessmentRescan/:ServiceOrderID',
    {
      schema: {
        tags: ['scans'],
        summary: 'Scan an order now',
        security: bearer,
        description: 'Spec 4.23. At most one rescan per order an hour (429 with Retry-After otherwise).',
        params: IdParams,
        response: responses(okBody({ Message: Type.String() })),
      },
      config: write,
    },
    async (request) => ({
      success: true as const,
      Message: await deps.assessments.rescan(
        { principal: principalOf(request), clientAddress: request.ip },
        Number(request.params.ServiceOrderID),
      ),
    }),
  );

  app.get<{ Params: { ServiceOrderID: string } }>(
    '/VulnerabilityAssessment/:ServiceOrderID',
    {
      schema: {
        tags: ['scans'],
        summary: "An order's vulnerability assessment: settings, latest report, history (extension)",
        security: bearer,
        params: IdParams,
        response: responses(
          okBody({
            VulnerabilityAssessment: Type.Object({}, { additionalProperties: true }),
            Report: Type.Optional(Type.Object({}, { additionalProperties: true })),
            History: Type.Array(Type.Object({}, { additionalProperties: true })),
          }),
        ),
      },
      config: read,
    },
    async (request) =>
      assessmentOut(await deps.assessments.view(principalOf(request), Number(request.params.ServiceOrderID))),
  );
}

function assessmentOut(view: AssessmentView) {
  const a = view.assessment;
  return {
    success: true as const,
    VulnerabilityAssessment:
      a === undefined
        ? { ServiceStatus: 'Inactive', EmailNotificationLevel: 'NONE' }
        : {
            ServiceStatus: a.status,
            EmailNotificationLevel: a.level,
            ...(a.lastRescanAt === null ? {} : { LastRescan: formatTimestamp(a.lastRescanAt) }),
          },
    ...(view.latest === undefined ? {} : { Report: reportOut(view.latest) }),
    History: view.history.map((h) => ({
      Effective: formatTimestamp(h.at),
      Ranking: h.grade ?? 'N/A',
      CriticalFindings: h.critical,
    })),
  };
}

/** A stored report as the API shows it. */
export function reportOut(r: ScanReport) {
  return {
    Effective: formatTimestamp(r.at),
    Engine: r.engine,
    CriteriaVersion: r.criteriaVersion,
    Ranking: r.grade ?? 'N/A',
    CriticalFindings: r.critical,
    Hosts: r.hosts.map((h) =>
      h.status === 'could-not-scan'
        ? { Name: h.name, Status: 'could not scan', Address: h.address, Problem: h.problem }
        : {
            Name: h.name,
            Status: 'scanned',
            Address: h.address,
            Ranking: h.rating.grade,
            Score: h.rating.score,
            Caps: h.rating.caps,
            DurationMs: h.durationMs,
            Findings: h.findings.map((f) => ({
              Id: f.id,
              Severity: f.severity,
              Title: f.title,
              ...(f.detail === undefined ? {} : { Detail: f.detail }),
            })),
            Protocols: h.protocols.map((p) => ({
              Version: p.version,
              Offered: p.offered,
              ServerPreference: p.serverPreference,
              CipherSuites: p.suites.map((s) => ({ Name: s.name, Bits: s.bits, Classes: s.classes })),
            })),
            ...(h.certificate === null
              ? {}
              : {
                  Certificate: {
                    Subject: h.certificate.subject,
                    Issuer: h.certificate.issuer,
                    NotAfter: formatTimestamp(h.certificate.notAfter),
                    Expired: h.certificate.expired,
                    MatchesName: h.certificate.matchesName,
                    Trusted: h.certificate.trusted,
                    ChainComplete: h.certificate.chainComplete,
                    ChainInOrder: h.certificate.chainInOrder,
                    KeyType: h.certificate.keyType,
                    KeyBits: h.certificate.keyBits,
                    SignatureAlgorithm: h.certificate.signatureAlgorithm,
                    IsOrderCertificate: h.certificate.isOrderCertificate,
                    OcspStapled: h.certificate.ocspStapled,
                  },
                }),
            Http: {
              RedirectsToHttps: h.http.redirectsToHttps,
              Hsts: h.http.hsts,
              Headers: h.http.headers,
            },
            Handshake: {
              SecureRenegotiation: h.handshake.secureRenegotiation,
              Compression: h.handshake.compression,
              FallbackScsv: h.handshake.fallbackScsv,
            },
          },
    ),
  };
}
