import type { Migration } from 'kysely';
import * as foundation from './001_foundation.ts';
import * as segments from './002_segments.ts';
import * as captcha from './003_captcha.ts';
import * as eventStreams from './004_event_streams.ts';
import * as customDomains from './005_custom_domains.ts';
import * as eventStreamSigningAndTail from './006_event_stream_signing_and_tail.ts';
import * as customDomainRechecks from './007_custom_domain_rechecks.ts';
import * as customDomainCertificates from './008_custom_domain_certificates.ts';
import * as emails from './009_emails.ts';
import * as ticketUserIndex from './010_ticket_user_index.ts';
import * as customDomainReadyHostnames from './011_custom_domain_ready_hostnames.ts';
import * as eventStreamCircuit from './012_event_stream_circuit.ts';
import * as deliveriesFailedIndex from './013_deliveries_failed_index.ts';
import * as usersImports from './014_users_imports.ts';
import * as deliveryAttemptsByStream from './015_delivery_attempts_by_stream.ts';
import * as emailOutboxByTenant from './016_email_outbox_by_tenant.ts';
import * as deliveryAttemptsStreamOrder from './017_delivery_attempts_stream_order.ts';
import * as deliveriesPendingByStream from './018_deliveries_pending_by_stream.ts';
import * as deliveriesRequeued from './019_deliveries_requeued.ts';
import * as textComparedBytewise from './020_text_compared_bytewise.ts';
import * as deliveryCounts from './021_delivery_counts.ts';
import * as eventStreamDeletion from './022_event_stream_deletion.ts';
import * as eventStreamRedeliveries from './023_event_stream_redeliveries.ts';
import * as eventStreamRedeliveryLanes from './024_event_stream_redelivery_lanes.ts';
import * as eventStreamRedeliveryLanesByRows from './025_event_stream_redelivery_lanes_by_rows.ts';

/** Every migration, in order. Names sort in the order they must run. */
export const migrations: Record<string, Migration> = {
  '001_foundation': foundation,
  '002_segments': segments,
  '003_captcha': captcha,
  '004_event_streams': eventStreams,
  '005_custom_domains': customDomains,
  '006_event_stream_signing_and_tail': eventStreamSigningAndTail,
  '007_custom_domain_rechecks': customDomainRechecks,
  '008_custom_domain_certificates': customDomainCertificates,
  '009_emails': emails,
  '010_ticket_user_index': ticketUserIndex,
  '011_custom_domain_ready_hostnames': customDomainReadyHostnames,
  '012_event_stream_circuit': eventStreamCircuit,
  '013_deliveries_failed_index': deliveriesFailedIndex,
  '014_users_imports': usersImports,
  '015_delivery_attempts_by_stream': deliveryAttemptsByStream,
  '016_email_outbox_by_tenant': emailOutboxByTenant,
  '017_delivery_attempts_stream_order': deliveryAttemptsStreamOrder,
  '018_deliveries_pending_by_stream': deliveriesPendingByStream,
  '019_deliveries_requeued': deliveriesRequeued,
  '020_text_compared_bytewise': textComparedBytewise,
  '021_delivery_counts': deliveryCounts,
  '022_event_stream_deletion': eventStreamDeletion,
  '023_event_stream_redeliveries': eventStreamRedeliveries,
  '024_event_stream_redelivery_lanes': eventStreamRedeliveryLanes,
  '025_event_stream_redelivery_lanes_by_rows': eventStreamRedeliveryLanesByRows,
};
